"""Split a document's Markdown into chunks of about 120–200 tokens, each led by its heading path.

A chunk never spans two sections. Inside a section: a FAQ question stays with its answer,
a list with its lead-in line, and each table row becomes "column: value" lines under the
table's title. Long text is cut at paragraphs, then sentences, then words.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from bot.llm.tokens import TokenCounter

#: Between the parts of a chunk's path: "Doc › Heading › Subheading".
SEPARATOR = " › "
#: A heading longer than this is cut in the path, so the path leaves room for the content.
PATH_PART_CHARS = 80

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_SEPARATOR_CELL = re.compile(r"^:?-+:?$")
_BOLD_LINE = re.compile(r"^\*\*([^*]+)\*\*$")
#: A sentence ends at . ! ? or … followed by space and a capital, a digit or an opening mark.
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+(?=[\"'«“(¿¡]?[A-ZÀ-ÖØ-Þ0-9])")


@dataclass(frozen=True)
class Chunk:
    """What is indexed and injected: the path line, then the content."""

    text: str
    path: tuple[str, ...]
    tokens: int


@dataclass
class _Block:
    kind: str  # "heading", "para", "list" or "table"
    lines: list[str]
    level: float = 0


@dataclass
class _Group:
    kind: str  # "text", "qa" or "table"
    head: str = ""  # the question, repeated atop each of its chunks
    caption: str = ""  # a table's own title line ("Prices:"), added to its path
    blocks: list[_Block] = field(default_factory=list)


def chunk_document(title: str, markdown: str, counter: TokenCounter, *, target_tokens: int = 160,
                   max_tokens: int = 200, min_tokens: int = 120, overlap_tokens: int = 30) -> list[Chunk]:
    """Split a document into chunks whose text starts with their path and stays within max_tokens."""
    title = _part(title) or "Untitled"
    chunks: list[Chunk] = []
    for path, blocks in _sections(title, markdown):
        question = path[-1].endswith("?")
        for group in _groups(blocks):
            group_path = (*path, group.caption) if group.caption else path
            prefix = counter.truncate(SEPARATOR.join(group_path), max(8, max_tokens // 4), marker="…")
            if group.head:
                prefix += "\n" + group.head
            fits = _fitter(prefix, counter, max_tokens)
            if group.kind == "table":
                pieces = [("\n\n", part) for row in _table_rows(group.blocks[0].lines)
                          for part in _split(row, fits, max_tokens)]
                bodies = _pack(pieces, fits, counter, prefix, max_tokens, min_tokens, 0)
            else:
                # An answer stays whole up to max_tokens; other text aims at target_tokens.
                aim = max_tokens if question or group.kind == "qa" else target_tokens
                pieces = _pieces(group.blocks, fits, max_tokens)
                bodies = _pack(pieces, fits, counter, prefix, aim, min_tokens, overlap_tokens)
            if not bodies and group.head:
                bodies = [""]  # a question without an answer still says what was asked
            for body in bodies:
                text = f"{prefix}\n{body}".strip()
                chunks.append(Chunk(text=text, path=group_path, tokens=counter.count(text)))
    return chunks


def _inline(text: str) -> str:
    """Collapse whitespace and drop bold markers, which only cost tokens."""
    return re.sub(r"\s+", " ", re.sub(r"\*\*|__", "", text)).strip()


def _part(text: str) -> str:
    """Return a heading as a path part: plain, on one line, at most PATH_PART_CHARS long."""
    text = _inline(text)
    return text if len(text) <= PATH_PART_CHARS else text[:PATH_PART_CHARS - 1].rstrip() + "…"


def _parse(markdown: str) -> list[_Block]:
    """Read Markdown into heading, paragraph, list and table blocks."""
    blocks: list[_Block] = []
    current: _Block | None = None
    fenced = False
    for raw in markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = re.sub(r"^(?:\s*>)+\s?", "", raw).rstrip()  # quotes read as plain text
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        stripped = line.strip()
        heading = None if fenced else _HEADING.match(stripped)
        if not stripped:
            current = None
        elif heading:
            blocks.append(_Block("heading", [_part(heading.group(2))], level=len(heading.group(1))))
            current = None
        elif stripped.startswith("|") and not fenced:
            if current is None or current.kind != "table":
                current = _Block("table", [])
                blocks.append(current)
            current.lines.append(stripped)
        elif _ITEM.match(line) and not fenced:
            # Items of a loose list (blank lines between them) are still one list.
            if current is None and blocks and blocks[-1].kind == "list":
                current = blocks[-1]
            elif current is None or current.kind != "list":
                current = _Block("list", [])
                blocks.append(current)
            current.lines.append("- " + _inline(_ITEM.sub("", line)) if not stripped[0].isdigit()
                                 else _inline(stripped))
        elif current is not None and current.kind == "list" and raw[:1].isspace():
            current.lines[-1] += " " + _inline(stripped)  # an item's continuation line
        else:
            if current is None or current.kind != "para":
                current = _Block("para", [])
                blocks.append(current)
            current.lines.append(stripped)
    return [b for b in blocks if b.kind == "heading" or any(_inline(line) for line in b.lines)]


def _sections(title: str, markdown: str) -> list[tuple[tuple[str, ...], list[_Block]]]:
    """Group blocks under their heading path; a fully bold short line counts as a subheading."""
    blocks = _parse(markdown)
    sections: list[tuple[tuple[str, ...], list[_Block]]] = [((title,), [])]
    stack: list[tuple[float, str]] = []
    real_level = 0
    for index, block in enumerate(blocks):
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        bold = _BOLD_LINE.match(block.lines[0]) if block.kind == "para" and len(block.lines) == 1 else None
        if bold and following is not None and following.kind != "heading" \
                and len(bold.group(1)) <= PATH_PART_CHARS and bold.group(1).strip()[-1:] not in ".?!:":
            block = _Block("heading", [_part(bold.group(1))], level=real_level + 0.5)
        if block.kind != "heading":
            sections[-1][1].append(block)
            continue
        text = block.lines[0]
        if block.level == 1 and text.casefold() == title.casefold():
            continue  # the document's own title is already the path's first part
        if block.level == int(block.level):
            real_level = int(block.level)
        while stack and stack[-1][0] >= block.level:
            stack.pop()
        stack.append((block.level, text))
        sections.append(((title, *(name for _, name in stack if name)), []))
    return [(path, blocks) for path, blocks in sections if blocks]


def _question(line: str) -> bool:
    """Return whether a paragraph's first line is a FAQ question ("Do you deliver?",
    "**Do you deliver?**", "Q: Do you deliver?"): a whole line that ends with "?"."""
    plain = _inline(line)
    return plain.endswith("?") and len(plain) <= 300


def _groups(blocks: list[_Block]) -> list[_Group]:
    """Split a section's blocks into text runs, question-and-answer pairs and tables."""
    groups: list[_Group] = []
    for block in blocks:
        if block.kind == "para" and _question(block.lines[0]):
            groups.append(_Group("qa", head=_inline(block.lines[0])))
            if rest := block.lines[1:]:
                groups[-1].blocks.append(_Block("para", rest))
        elif block.kind == "table":
            caption = ""
            last = groups[-1] if groups and groups[-1].kind == "text" else None
            lead = last.blocks[-1] if last and last.blocks[-1].kind == "para" else None
            if last and lead and len(lead.lines) == 1 and lead.lines[0].endswith(":") \
                    and len(lead.lines[0]) <= PATH_PART_CHARS:
                caption = _part(last.blocks.pop().lines[0].rstrip(":"))
                if not last.blocks:
                    groups.pop()
            groups.append(_Group("table", caption=caption, blocks=[block]))
        elif groups and groups[-1].kind in ("text", "qa"):
            groups[-1].blocks.append(block)  # answers run on until the next question or heading
        else:
            groups.append(_Group("text", blocks=[block]))
    return groups


def _fitter(prefix: str, counter: TokenCounter, max_tokens: int) -> Callable[[str], bool]:
    return lambda body: counter.count(f"{prefix}\n{body}") <= max_tokens


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(_inline(text)) if s]


def _split(text: str, fits: Callable[[str], bool], limit: int) -> list[str]:
    """Cut text that does not fit into parts that do: at lines, then sentences, then words.
    A part holds at most limit words (a word is a token at least), or limit * 16 characters
    of one long word: this bounds each search, so a megabyte without spaces stays fast."""
    if len(text) <= limit * 16 and fits(text):
        return [text]
    if "\n" in text:
        return [part for line in text.split("\n") for part in _split(line, fits, limit)]
    parts: list[str] = []
    for sentence in _sentences(text):
        if fits(sentence):
            parts.append(sentence)
            continue
        words = sentence.split(" ")
        while words:
            short = len(words[0]) <= limit * 16  # else counting it alone would cost more than cutting it
            take = _most(lambda n: fits(" ".join(words[:n])), min(len(words), limit)) if short else 0
            if take == 0:  # one "word" longer than a chunk: cut it by characters
                cut = max(1, _most(lambda n: fits(words[0][:n]), min(len(words[0]), limit * 16)))
                parts.append(words[0][:cut])
                words[0] = words[0][cut:]
                words = words if words[0] else words[1:]
                continue
            parts.append(" ".join(words[:take]))
            words = words[take:]
    return parts


def _most(ok: Callable[[int], bool], upper: int) -> int:
    """Return the largest n in [0, upper] with ok(n), for ok true up to some n and false after."""
    low, high = 0, upper
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if ok(middle) else (low, middle - 1)
    return low


def _pieces(blocks: list[_Block], fits: Callable[[str], bool], limit: int) -> list[tuple[str, str]]:
    """Return (joiner, text) pieces: a paragraph, or its sentences if it is too long; a list
    with its lead-in, or its items with the lead-in kept on the first."""
    pieces: list[tuple[str, str]] = []
    for index, block in enumerate(blocks):
        if block.kind == "list":
            lead = ""
            if index and blocks[index - 1].kind == "para" and pieces:
                lead = pieces.pop()[1]  # the paragraph just before is the list's lead-in
            whole = "\n".join(([lead] if lead else []) + block.lines)
            if fits(whole):
                pieces.append(("\n\n", whole))
                continue
            items = [("\n", part) for line in block.lines for part in _split(line, fits, limit)]
            if lead and fits(f"{lead}\n{items[0][1]}"):
                items[0] = ("\n", f"{lead}\n{items[0][1]}")
            elif lead:
                items[:0] = [("\n", part) for part in _split(lead, fits, limit)]
            pieces.extend([("\n\n", items[0][1]), *items[1:]])
        else:
            text = _inline(" ".join(block.lines))  # Markdown's soft line breaks are spaces
            parts = _split(text, fits, limit)
            pieces.extend((" " if n else "\n\n", part) for n, part in enumerate(parts))
    return pieces


def _overlap(body: str, counter: TokenCounter, limit: int) -> str:
    """Return the last sentence(s) of a chunk's last paragraph, within limit tokens."""
    taken: list[str] = []
    for sentence in reversed(_sentences(body.rsplit("\n", 1)[-1])):
        if counter.count(" ".join([sentence, *taken])) > limit:
            break
        taken.insert(0, sentence)
    return " ".join(taken)


def _pack(pieces: list[tuple[str, str]], fits: Callable[[str], bool], counter: TokenCounter, prefix: str,
          target: int, min_tokens: int, overlap_tokens: int) -> list[str]:
    """Fill chunks with pieces up to target tokens (past it only to reach min_tokens), never past
    max; start each next chunk with the last sentence(s) of the one before."""
    bodies: list[str] = []
    body = ""
    queue = list(reversed(pieces))
    while queue:
        joiner, text = queue.pop()
        if not body:
            body = text
            continue
        candidate = f"{body}{joiner}{text}"
        short = counter.count(f"{prefix}\n{body}") < min_tokens
        if fits(candidate) and (short or counter.count(f"{prefix}\n{candidate}") <= target):
            body = candidate
            continue
        sentences = _sentences(text) if "\n" not in text else []
        if short and len(sentences) > 1:
            # A long paragraph after a short one: fill this chunk up with its first sentences.
            queue.extend(reversed([(joiner, sentences[0]), *((" ", s) for s in sentences[1:])]))
            continue
        bodies.append(body)
        lead = _overlap(body, counter, overlap_tokens) if overlap_tokens else ""
        body = f"{lead}{joiner}{text}" if lead and fits(f"{lead}{joiner}{text}") else text
    if body:
        bodies.append(body)
    return bodies


def _table_rows(lines: list[str]) -> list[str]:
    """Render each row of a pipe table as "Header: cell" lines, leaving empty cells out."""
    rows = [[cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))] for line in lines]
    rows = [[_inline(cell.replace("\\|", "|")) for cell in row] for row in rows]
    header: list[str] = []
    if len(rows) > 1 and any(rows[1]) and all(_SEPARATOR_CELL.match(cell) for cell in rows[1] if cell):
        header, rows = rows[0], rows[2:]
    rendered = []
    for row in rows:
        if all(_SEPARATOR_CELL.match(cell) or not cell for cell in row):
            continue
        names = [header[n] if n < len(header) and header[n] else f"Column {n + 1}" for n in range(len(row))]
        lines_out = [f"{name}: {cell}" for name, cell in zip(names, row) if cell]
        if lines_out:
            rendered.append("\n".join(lines_out))
    return rendered
