"""Read a document (Markdown, plain text, HTML or PDF) into Markdown text and its own title.

The output is the Markdown that chunking.py reads: "#" headings, paragraphs, "- " lists and
pipe tables with a "|---|" separator under the header row. Nothing is ever fetched.
"""

from __future__ import annotations

import io
import logging
import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lxml.html import HtmlElement
    from pypdf import PageObject

KINDS = ("markdown", "text", "html", "pdf")

# A damaged PDF makes pypdf log a warning per flaw (one dumps a whole encoding table); the
# operator gets one ExtractionError instead.
logging.getLogger("pypdf").setLevel(logging.ERROR)

#: A crafted PDF can hold many thousands of pages, or streams that inflate to gigabytes of
#: text; the caller caps the file's bytes, these cap what it can expand into.
MAX_PAGES = 500
MAX_TEXT_CHARS = 5_000_000

#: A standalone line this short, without final punctuation, may be a heading (text and PDF).
HEADING_CHARS = 60

_SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html",
             ".pdf": "pdf"}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f\u200b-\u200d\u2060\ufeff]")
_BULLET = re.compile(r"^(?:[-*+•–·▪]|\d{1,3}[.)])\s+")
_PAGE_NUMBER = re.compile(r"^(?:page\s+)?\d{1,4}(?:\s*(?:/|of)\s*\d{1,4})?$", re.I)
#: A table cell in a PDF's layout text or an aligned text file: words joined by single spaces.
_CELL = re.compile(r"[^ \t]+(?: [^ \t]+)*")
#: YAML front matter: "---", lines of "key: value", "---" (a rule at the top is not front matter).
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(?=[\w-]+[ \t]*:)(.*?)^(?:---|\.\.\.)[ \t]*$\n?", re.S | re.M)
#: Titles that PDF writers fill in by themselves, not the author.
_JUNK_TITLE = re.compile(r"^(?:untitled|microsoft (?:word|powerpoint) - .*|.*\.(?:docx?|pptx?|indd|pdf|odt))$",
                         re.I)


class ExtractionError(ValueError):
    """A document that cannot be read (a broken PDF, an empty file, an unknown type); the
    message is for the operator."""


@dataclass(frozen=True)
class Extracted:
    """A document's text as Markdown, with its kind and its own title, if it has one."""

    kind: str
    title: str | None
    text: str


def kind_of(filename: str) -> str | None:
    """Return a document's kind from its file name's suffix, or None for a type we cannot read."""
    return _SUFFIXES.get(os.path.splitext(filename)[1].lower())


def extract(data: bytes, kind: str) -> Extracted:
    """Read a document's bytes as the given kind; raise ExtractionError for anything unreadable."""
    readers = {"markdown": _markdown, "text": _text, "html": _html, "pdf": _pdf}
    if kind not in readers:
        raise ExtractionError(f"unknown document type {kind!r}: use one of {', '.join(KINDS)}")
    if not data.strip():
        raise ExtractionError("the file is empty")
    title, text = readers[kind](data)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(line.rstrip() for line in text.split("\n"))).strip()
    if not re.search(r"\w", text):
        raise ExtractionError("no text could be read from the file")
    return Extracted(kind=kind, title=_squash(title) or None, text=text)


def _squash(text: str | None) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _clean(text: str) -> str:
    """Normalise line ends and spaces, and drop control and zero-width characters."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ").replace("\f", "\n")
    return _CONTROL.sub("", text)


def _check_not_binary(text: str) -> None:
    # A NUL or many control characters mean an image, an archive or a PDF given the wrong name.
    sample = text[:8192]
    controls = len(re.findall(r"[\x00-\x08\x0e-\x1f\x7f\ufffd]", sample))
    if "\x00" in sample or controls > len(sample) // 20:
        raise ExtractionError("this looks like a binary file, not text: check the file and its type")


def _decode_utf8(data: bytes) -> str:
    """Decode UTF-8 (a BOM is fine; UTF-16 only with its BOM); invalid bytes are an error, not
    replaced, so a file saved in another encoding is caught instead of indexed as mojibake."""
    encoding = "utf-16" if data.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        raise ExtractionError(f"the file is not UTF-8 text (invalid byte at offset {err.start}): "
                              "save it as UTF-8 and add it again") from None
    _check_not_binary(text)
    return _clean(text)


# --- Markdown and plain text ---------------------------------------------------------------

def _markdown(data: bytes) -> tuple[str | None, str]:
    text = _decode_utf8(data)
    fm_title = None
    front = _FRONT_MATTER.match(text)
    if front:
        found = re.search(r"^title:\s*(.+?)\s*$", front.group(1), re.M)
        fm_title = found.group(1).strip("'\"") if found else None
        text = text[front.end():]
    # Setext headings ("Title" over "=====") become ATX, the only kind chunking reads.
    text = re.sub(r"^([^\n\s#>|*+-][^\n]*)\n=+[ \t]*$", r"# \1", text, flags=re.M)
    text = re.sub(r"^([^\n\s#>|*+-][^\n]*)\n-{2,}[ \t]*$", r"## \1", text, flags=re.M)
    fenced = False
    for line in text.split("\n"):
        fenced = fenced != line.lstrip().startswith("```")
        if not fenced and line.startswith("# "):
            return re.sub(r"\s+#+\s*$", "", line[2:]).strip().strip("*_").strip(), text
    return fm_title, text


def _text(data: bytes) -> tuple[str | None, str]:
    return None, _lines_to_markdown(_decode_utf8(data).split("\n"))


# --- HTML ----------------------------------------------------------------------------------

def _decode_html(data: bytes) -> str:
    """Decode by BOM, else UTF-8, else the charset the page declares, else Windows-1252."""
    if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return _decode_utf8(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        declared = re.search(rb"charset=[\"']?([\w.:-]+)", data[:4096], re.I)
        try:
            text = data.decode(declared.group(1).decode("ascii") if declared else "cp1252", errors="replace")
        except LookupError:
            text = data.decode("cp1252", errors="replace")
    _check_not_binary(text)
    return _clean(text)


def _html(data: bytes) -> tuple[str | None, str]:
    # Imported here: trafilatura is only needed while a document is added, never on the message path.
    import trafilatura
    from trafilatura.settings import use_config
    from trafilatura.utils import load_html

    text = _decode_html(data)
    try:
        # load_html refuses a fragment ("<h2>..</h2><p>..</p>", no <html>) or roots it in a
        # <div>, where trafilatura drops the headings: give it a page to sit in.
        tree = load_html(text)
        if tree is None or tree.tag != "html":
            tree = load_html(f"<html><body>{text}</body></html>")
        if tree is None:
            raise ExtractionError("this is not readable HTML")
        title = _html_title(tree)
        _prepare_html(tree)
        config = use_config()
        # By default a page under 250 characters of main text falls back to a baseline that
        # keeps the navigation and flattens headings and tables into bare lines.
        config.set("DEFAULT", "MIN_EXTRACTED_SIZE", "1")
        markdown = trafilatura.extract(
            tree, output_format="markdown", include_tables=True, include_formatting=True,
            include_links=False, include_images=False, include_comments=False, favor_recall=True,
            deduplicate=False, config=config)
    except ExtractionError:
        raise
    except Exception as err:  # lxml and trafilatura raise many types on hostile markup
        raise ExtractionError(f"this HTML could not be read ({type(err).__name__})") from err
    if not markdown:
        raise ExtractionError("no main text was found in this HTML page")
    return title, _clean(markdown)


def _html_title(tree: HtmlElement) -> str | None:
    """Return the first <h1> outside the page's header, nav and footer, else the <title>."""
    for h1 in tree.iter("h1"):
        if not any(a.tag in ("header", "nav", "footer", "aside") for a in h1.iterancestors()):
            if text := _squash(h1.text_content()):
                return text
    return _squash(tree.findtext(".//title")) or None


def _prepare_html(tree: HtmlElement) -> None:
    """Reshape what trafilatura would flatten: FAQs, header rows without <th>, a page without <main>."""
    # <dt>/<summary> would come out as a list item or a sibling heading; a bold question line
    # followed by its answer is what chunking keeps together.
    for term in [*tree.iter("dt"), *tree.iter("summary")]:
        text = _squash(term.text_content())
        for child in list(term):
            term.remove(child)
        term.tag, term.text = "p", None
        bold = term.makeelement("b", {})
        bold.text = text
        term.append(bold)
    for box in [*tree.iter("dl"), *tree.iter("details")]:
        box.tag = "div"
    for answer in list(tree.iter("dd")):  # trafilatura drops a bare-text <div> here: make it a <p>
        blocks = ("p", "div", "ul", "ol", "table", "dl")
        answer.tag = "div" if any(d.tag in blocks for d in answer.iterdescendants()) else "p"
    # A table without <th> loses its header row; promote a first row of words, no figures.
    for table in tree.iter("table"):
        first = table.find(".//tr")
        if table.find(".//th") is None and first is not None:
            cells = [_squash(cell.text_content()) for cell in first.findall("td")]
            if len(cells) >= 2 and all(cell and not re.search(r"\d", cell) for cell in cells):
                for cell in first.findall("td"):
                    cell.tag = "th"
    # Without <main> or <article>, trafilatura drops headings that sit directly in <body>.
    body = tree.find(".//body")
    if body is not None and tree.find(".//main") is None and tree.find(".//article") is None:
        article = body.makeelement("article", {})
        for child in list(body):
            article.append(child)
        article.text, body.text = body.text, None
        body.append(article)


# --- PDF -----------------------------------------------------------------------------------

def _pdf(data: bytes) -> tuple[str | None, str]:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ExtractionError("the PDF is password-protected: remove the password and add it again")
        pages = reader.pages
        count = len(pages)
        meta_title = (reader.metadata or {}).get("/Title")
    except ExtractionError:
        raise
    except Exception as err:  # pypdf raises many types on a damaged or encrypted file
        raise ExtractionError(f"this PDF cannot be read ({type(err).__name__}): it may be damaged "
                              "or encrypted") from err
    lines: list[str] = []
    size = 0
    for index in range(min(count, MAX_PAGES)):
        page_lines = [line.rstrip() for line in _page_text(pages, index).split("\n")]
        lines.extend([*page_lines, "", ""])
        size += sum(len(line) for line in page_lines)
        if size > MAX_TEXT_CHARS:
            break
    if not any(re.search(r"\w", line) for line in lines):
        raise ExtractionError("no text could be read: scanned PDFs need OCR first")
    markdown = _lines_to_markdown(lines)
    title = _squash(str(meta_title)) if isinstance(meta_title, str) else ""
    title = "" if _JUNK_TITLE.match(title) else title
    first = markdown.split("\n", 1)[0]
    if first.startswith("## ") and (not title or first[3:].casefold() == title.casefold()):
        title = title or first[3:]
        markdown = "#" + markdown[2:]  # the first line is the document's own title: an H1
    return title or None, markdown


def _page_text(pages: Sequence[PageObject], index: int) -> str:
    """Return a page's text laid out in columns (tables stay aligned), else plain, else nothing."""
    for options in ({"extraction_mode": "layout"}, {}):
        try:
            return _clean(pages[index].extract_text(**options) or "")
        except Exception:  # a page pypdf cannot lay out may still read plainly; else skip it
            continue
    return ""


# --- Lines (plain text, PDF) to Markdown -------------------------------------------------------

def _cells(line: str) -> list[tuple[int, int, str]]:
    """Split a line at tabs or runs of 2+ spaces into (start, end, text) cells."""
    return [(m.start(), m.end(), m.group()) for m in _CELL.finditer(line.expandtabs(8))]


def _aligned(cell: tuple[int, int, str], header: tuple[int, int, str]) -> bool:
    # Left-, right- or centre-aligned under its header; justified prose fails all three.
    return (abs(cell[0] - header[0]) <= 2 or abs(cell[1] - header[1]) <= 2
            or abs(cell[0] + cell[1] - header[0] - header[1]) <= 4)


def _table_at(lines: list[str], start: int) -> tuple[str | None, int]:
    """Return a pipe table read from lines[start:] and the index after it, or (None, start):
    2+ lines with the same number of cells, aligned under the first (unless tab-separated)."""
    header = _cells(lines[start])
    aligned = "\t" not in lines[start]
    if len(header) < 2 or _BULLET.match(lines[start].strip()):
        return None, start
    rows: list[list[str]] = []
    index = end = start + 1
    while index < len(lines):
        if not lines[index].strip():
            if index - end >= 2:  # layout text leaves one blank line between rows; more ends it
                break
            index += 1
            continue
        cells = _cells(lines[index])
        if len(cells) != len(header) or (aligned and not all(map(_aligned, cells[1:], header[1:]))):
            break
        rows.append([cell[2] for cell in cells])
        index = end = index + 1
    if not rows:
        return None, start
    table = [[cell[2] for cell in header], ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table), end


def _title_like(line: str) -> bool:
    """Return whether a line could be a heading: short, capitalised, no final punctuation."""
    return (0 < len(line) <= HEADING_CHARS and line[-1] not in ".,;:!?"
            and (line[0].isupper() or line[0].isdigit()) and bool(re.search(r"[^\W\d_]", line))
            and not _BULLET.match(line))


def _lines_to_markdown(lines: list[str]) -> str:
    """Turn visual lines into Markdown: aligned columns become pipe tables, short standalone
    lines become "##" headings, wrapped lines are joined into paragraphs."""
    blocks: list[list[str] | str] = []  # a paragraph's lines, or a rendered table
    paragraph: list[str] = []
    index = 0
    while index < len(lines):
        table, after = _table_at(lines, index)
        if table:
            if paragraph:
                blocks.append(paragraph)
            blocks.append(table)
            paragraph, index = [], after
            continue
        line = _squash(lines[index])
        if line and not _PAGE_NUMBER.match(line):
            paragraph.append(line)
        elif not line and paragraph:
            blocks.append(paragraph)
            paragraph = []
        index += 1
    if paragraph:
        blocks.append(paragraph)
    out: list[str] = []
    for position, block in enumerate(blocks):
        following = blocks[position + 1] if position + 1 < len(blocks) else None
        if isinstance(block, str):
            out.append(block)
        elif len(block) == 1 and following is not None and _title_like(block[0]):
            out.append("## " + block[0])  # a short line standing alone, above text or a table
        elif (len(block) == 1 and block[0].endswith(":") and len(block[0]) <= HEADING_CHARS
              and isinstance(following, list) and _BULLET.match(following[0])):
            out.append("## " + block[0][:-1])
        elif len(block) > 1 and _title_like(block[0]) and len(block[0]) < 0.6 * len(block[1]) \
                and not _BULLET.match(block[1]):
            out.extend(["## " + block[0], _paragraph(block[1:])])
        else:
            out.append(_paragraph(block))
    return "\n\n".join(out)


def _paragraph(lines: list[str]) -> str:
    """Join wrapped prose lines; keep short lines, list items and question lines on their own."""
    widest = max(len(line) for line in lines)
    out: list[str] = []
    for line in lines:
        if _BULLET.match(line):
            out.append("- " + _BULLET.sub("", line) if not line[0].isdigit() else line)
            continue
        previous = out[-1] if out else ""
        wrapped = widest >= 50 and len(previous) >= 0.6 * widest and previous[-1:] not in (":", "?")
        if out and wrapped and previous.endswith("-") and line[:1].islower():
            out[-1] = previous[:-1] + line  # a word hyphenated across two lines
        elif out and wrapped:
            out[-1] = f"{previous} {line}"
        else:
            out.append(line)
    return "\n".join(out)
