"""Extraction: each kind of document read into Markdown, and anything unreadable refused."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from fpdf import FPDF

from bot.knowledge import extract as extract_module
from bot.knowledge.chunking import chunk_document
from bot.knowledge.extract import KINDS, Extracted, ExtractionError, extract, kind_of
from bot.llm.tokens import TokenCounter

DATA = Path(__file__).parent / "data"
PRICES = [("Pastel de nata", "Single", "€1.20"), ("Pastel de nata", "Box of 6", "€6.50"),
          ("Bolo de arroz", "Single", "€1.10"), ("Croissant", "Large", "€1.60")]


def price_list_pdf(*, title: str | None = "Padaria Lusa price list", password: str | None = None) -> bytes:
    """Write a two-page PDF: a title, a paragraph, a price table under "Pastries", then "Delivery"."""
    pdf = FPDF()
    pdf.core_fonts_encoding = "windows-1252"  # the core fonts' code page that has "€"
    if title:
        pdf.set_title(title)
    if password:
        pdf.set_encryption(owner_password="owner", user_password=password)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(0, 10, "Padaria Lusa price list", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, "All prices include VAT. Orders above €20.00 are delivered free of charge "
                         "within Lisbon. Prices are valid from March 2024 until further notice.")
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 12)
    pdf.cell(0, 8, "Pastries", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    with pdf.table(col_widths=(60, 40, 30)) as table:
        for values in [("Product", "Size", "Price"), *PRICES]:
            row = table.row()
            for value in values:
                row.cell(value)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 12)
    pdf.cell(0, 8, "Delivery", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, "We deliver Tuesday to Saturday between 8:00 and 12:00. "
                         "Orders must be placed by 18:00 the day before.")
    return bytes(pdf.output())


@pytest.mark.parametrize(("name", "kind"), [
    ("faq.md", "markdown"), ("FAQ.MARKDOWN", "markdown"), ("notes.txt", "text"), ("page.HTM", "html"),
    ("policy.html", "html"), ("prices.pdf", "pdf"), ("photo.jpg", None), ("README", None),
    ("prices.pdf.zip", None),
])
def test_kind_of_reads_the_suffix(name: str, kind: str | None) -> None:
    assert kind_of(name) == kind


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ExtractionError, match="unknown document type"):
        extract(b"hello", "docx")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("data", [b"", b"  \n\t\n"])
def test_empty_files_are_refused(kind: str, data: bytes) -> None:
    with pytest.raises(ExtractionError, match="empty"):
        extract(data, kind)


def test_markdown_drops_front_matter_and_bom_and_takes_the_first_h1_as_title() -> None:
    data = "\ufeff---\ntitle: From front matter\nlang: en\n---\n# Opening hours\n\nWe open at 8.\n".encode()
    result = extract(data, "markdown")
    assert result == Extracted(kind="markdown", title="Opening hours", text="# Opening hours\n\nWe open at 8.")


def test_markdown_title_falls_back_to_front_matter_and_skips_code_fences() -> None:
    assert extract(b"---\ntitle: 'Menu'\n---\nSome text.", "markdown").title == "Menu"
    fenced = extract(b"```\n# not a title\n```\n\n# Real title\n\nText.", "markdown")
    assert fenced.title == "Real title"
    assert extract(b"Just text, no heading.", "markdown").title is None


def test_markdown_setext_headings_become_atx() -> None:
    result = extract(b"Menu\n====\n\nDrinks\n------\n\nCoffee and tea.", "markdown")
    assert result.title == "Menu"
    assert result.text == "# Menu\n\n## Drinks\n\nCoffee and tea."


def test_markdown_that_is_not_utf8_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ExtractionError, match="not UTF-8.*save it as UTF-8"):
        extract("# Café\n\nPão de ló.".encode("latin-1"), "markdown")


@pytest.mark.parametrize("kind", ["markdown", "text", "html"])
def test_binary_garbage_is_refused_as_text(kind: str) -> None:
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00" + bytes(range(256)) * 4
    with pytest.raises(ExtractionError):
        extract(png, kind)
    with pytest.raises(ExtractionError):
        extract(b"\x01\x02\x03hello\x04\x05\x06\x07\x08\x0e\x0f" * 20, kind)


PLAIN = """Opening hours
Monday to Friday 8:00 to 19:00 and Saturday 9:00 to 13:00. We are closed on Sundays,
on public holidays and for two weeks in August.

Our breads:

* Sourdough loaf
* Broa de milho

Thank you.

We bake every night so that the bread is fresh in the morning for you.
The ovens are wood-fired.

Do you deliver?
Yes, within Lisbon, for orders above 20 euros.

See you soon
"""


def test_plain_text_keeps_paragraphs_and_finds_headings_and_lists_conservatively() -> None:
    result = extract(PLAIN.encode(), "text")
    assert result.title is None
    assert result.text.split("\n\n") == [
        "## Opening hours",
        "Monday to Friday 8:00 to 19:00 and Saturday 9:00 to 13:00. We are closed on Sundays, "
        "on public holidays and for two weeks in August.",
        "## Our breads",
        "- Sourdough loaf\n- Broa de milho",
        "Thank you.",  # ends with a period: not a heading
        "We bake every night so that the bread is fresh in the morning for you. The ovens are wood-fired.",
        "Do you deliver?\nYes, within Lisbon, for orders above 20 euros.",  # the question keeps its line
        "See you soon",  # nothing follows it: not a heading
    ]


def test_plain_text_aligned_columns_become_a_table_but_prose_with_double_spaces_does_not() -> None:
    text = ("Prices\n\nProduct         Size       Price\nPastel de nata  Single     1.20\n"
            "Bolo de arroz   Box of 6   6.50\n\n"
            "We bake daily.  Our bread is fresh and made\nwith flour.  Delivery is free in town.\n")
    result = extract(text.encode(), "text").text
    assert "## Prices\n\n| Product | Size | Price |\n| --- | --- | --- |\n| Pastel de nata | Single | 1.20 |\n" \
           "| Bolo de arroz | Box of 6 | 6.50 |" in result
    assert "We bake daily. Our bread is fresh and made\nwith flour. Delivery is free in town." in result


def test_plain_text_tab_separated_rows_become_a_table() -> None:
    result = extract(b"Day\tHours\nMonday\t8-19\nSaturday\t9-13\n", "text").text
    assert result == "| Day | Hours |\n| --- | --- |\n| Monday | 8-19 |\n| Saturday | 9-13 |"


def test_html_keeps_the_main_text_with_headings_tables_and_faq() -> None:
    result = extract((DATA / "returns_policy.html").read_bytes(), "html")
    assert result.title == "Returns policy"
    for boilerplate in ("cookies", "Home", "Shop", "Contact us", "All rights reserved", "Privacy"):
        assert boilerplate not in result.text
    for line in ("# Returns policy", "## Fresh products", "### Damaged deliveries", "## Refund times",
                 "| Payment method | Refund time |", "|---|---|", "| Card | 5 working days |",
                 "| MB Way | 2 working days |", "**Can I exchange a cake?**",
                 "Yes, up to 48 hours before the pickup date.", "**Do you refund delivery fees?**",
                 "Only when the order was wrong or damaged."):
        assert line in result.text.split("\n"), line


def test_short_html_without_main_keeps_headings_and_a_header_row_of_plain_cells() -> None:
    # Under 250 characters of text trafilatura would fall back to a baseline that keeps the
    # navigation and flattens the headings and the table into bare lines.
    page = b"""<html><head><title>Hours</title></head><body>
    <div class="nav"><a href="/">Home</a> <a href="/menu">Menu</a></div>
    <h1>Opening hours</h1><p>Closed on Sundays.</p>
    <h2>Weekdays</h2>
    <table><tr><td>Day</td><td>Hours</td></tr><tr><td>Mon</td><td>8-19</td></tr></table>
    <footer>Footer words</footer></body></html>"""
    result = extract(page, "html")
    assert result.title == "Opening hours"
    assert result.text == ("# Opening hours\n\nClosed on Sundays.\n\n## Weekdays\n\n"
                           "| Day | Hours |\n|---|---|\n| Mon | 8-19 |")


def test_an_html_fragment_is_read() -> None:
    result = extract(b"<h2>Parking</h2><p>Free parking behind the shop.</p>", "html")
    assert result.text == "## Parking\n\nFree parking behind the shop."
    assert result.title is None


def test_html_title_skips_a_logo_h1_in_the_header_and_decodes_the_declared_charset() -> None:
    page = ('<html><head><meta charset="windows-1252"><title>Delivery</title></head><body>'
            '<header><h1>Padaria Lusa</h1></header><main><p>Caf\xe9 and p\xe3o delivered daily before '
            'nine in the morning.</p></main></body></html>').encode("cp1252")
    result = extract(page, "html")
    assert result.title == "Delivery"
    assert "Café and pão delivered daily" in result.text


def test_pdf_price_table_becomes_a_pipe_table_under_its_title() -> None:
    result = extract(price_list_pdf(), "pdf")
    assert result.title == "Padaria Lusa price list"
    assert result.text.startswith("# Padaria Lusa price list\n\nAll prices include VAT.")
    assert ("## Pastries\n\n| Product | Size | Price |\n| --- | --- | --- |\n"
            + "\n".join(f"| {p} | {s} | {c} |" for p, s, c in PRICES)) in result.text
    assert result.text.endswith("## Delivery\n\nWe deliver Tuesday to Saturday between 8:00 and 12:00. "
                                "Orders must be placed by 18:00 the day before.")


def test_pdf_title_falls_back_to_the_first_line() -> None:
    assert extract(price_list_pdf(title=None), "pdf").title == "Padaria Lusa price list"


def test_pdf_without_text_asks_for_ocr() -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(10, 10, 80, 120, style="F")  # stands in for a scanned page: marks, no text
    with pytest.raises(ExtractionError, match="OCR"):
        extract(bytes(pdf.output()), "pdf")


def test_password_protected_pdf_is_refused() -> None:
    with pytest.raises(ExtractionError, match="password"):
        extract(price_list_pdf(password="secret"), "pdf")


@pytest.mark.parametrize("data", [b"%PDF-1.4\nnot really a pdf", b"not a pdf at all", price_list_pdf()[:300],
                                  price_list_pdf()[:-200]])
def test_broken_pdf_is_refused(data: bytes) -> None:
    with pytest.raises(ExtractionError):
        extract(data, "pdf")


def test_pdf_reading_stops_at_the_page_and_text_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extract_module, "MAX_PAGES", 1)
    assert "Delivery" not in extract(price_list_pdf(), "pdf").text
    monkeypatch.setattr(extract_module, "MAX_PAGES", 500)
    monkeypatch.setattr(extract_module, "MAX_TEXT_CHARS", 10)
    one_page = extract(price_list_pdf(), "pdf").text
    assert "Pastries" in one_page and "Delivery" not in one_page


def _read_or_refuse(data: bytes, kind: str) -> None:
    try:
        result = extract(data, kind)
    except ExtractionError as err:
        assert str(err)
    else:
        assert result.kind == kind and result.text.strip()


@pytest.mark.parametrize("kind", KINDS)
def test_random_bytes_raise_only_extraction_errors(kind: str) -> None:
    rng = random.Random(f"fuzz-{kind}")
    prefixes = {"pdf": b"%PDF-1.7\n", "html": b"<html><body>", "markdown": b"# ", "text": b""}
    for n in range(30):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
        _read_or_refuse(data, kind)
        _read_or_refuse(prefixes[kind] + data, kind)


def test_damaged_pdfs_raise_only_extraction_errors() -> None:
    rng = random.Random("damaged-pdf")
    good = price_list_pdf()
    for _ in range(60):
        data = bytearray(good)
        for _ in range(rng.randrange(1, 30)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        _read_or_refuse(bytes(data), "pdf")


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter("gpt-4o-mini")


def test_pdf_price_rows_end_up_as_column_value_lines_in_one_chunk(counter: TokenCounter) -> None:
    document = extract(price_list_pdf(), "pdf")
    chunks = chunk_document(document.title or "prices.pdf", document.text, counter)
    rows = [c for c in chunks if c.path == ("Padaria Lusa price list", "Pastries")]
    assert len(rows) == 1 and rows[0].text.startswith("Padaria Lusa price list › Pastries\n")
    for product, size, price in PRICES:
        assert f"Product: {product}\nSize: {size}\nPrice: {price}" in rows[0].text
    assert any(c.path == ("Padaria Lusa price list", "Delivery") and "18:00" in c.text for c in chunks)


def test_html_page_chunks_keep_rows_and_faq_answers(counter: TokenCounter) -> None:
    document = extract((DATA / "returns_policy.html").read_bytes(), "html")
    chunks = chunk_document(document.title or "returns_policy.html", document.text, counter)
    texts = [c.text for c in chunks]
    assert "Returns policy › Refund times\nPayment method: Card\nRefund time: 5 working days\n\n" \
           "Payment method: MB Way\nRefund time: 2 working days" in texts
    assert "Returns policy › Questions\nCan I exchange a cake?\nYes, up to 48 hours before the pickup date." in texts
    assert "Returns policy › Fresh products › Damaged deliveries\nIf your delivery arrives damaged, refuse it " \
           "or keep the packaging and contact us the same day." in texts
    assert not any("cookie" in text.lower() for text in texts)
