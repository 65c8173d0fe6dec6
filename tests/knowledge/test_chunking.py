"""Chunking: paths, sizes, overlap, FAQ pairs, table rows and lists, as the issue's rules say."""

from __future__ import annotations

import re

import pytest

from bot.knowledge.chunking import SEPARATOR, Chunk, chunk_document
from bot.llm.tokens import TokenCounter


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter("gpt-4o-mini")


def body(chunk: Chunk) -> str:
    """Return a chunk's content: its text after the path line."""
    return chunk.text.split("\n", 1)[1]


def sentences(count: int, topic: str = "bread") -> list[str]:
    return [f"Sentence {n} says something useful about our {topic} and the ovens." for n in range(count)]


NESTED = """# Padaria Lusa

A family bakery in Lisbon.

## Opening hours

Monday to Friday, 8:00 to 19:00.

### Sundays

Closed on Sundays.

## Delivery

We deliver within Lisbon.

# Appendix

Company details.
"""


def test_nested_headings_give_each_chunk_its_path(counter: TokenCounter) -> None:
    chunks = chunk_document("Padaria Lusa", NESTED, counter)
    assert [(c.path, c.text) for c in chunks] == [
        (("Padaria Lusa",), "Padaria Lusa\nA family bakery in Lisbon."),
        (("Padaria Lusa", "Opening hours"), "Padaria Lusa › Opening hours\nMonday to Friday, 8:00 to 19:00."),
        (("Padaria Lusa", "Opening hours", "Sundays"), "Padaria Lusa › Opening hours › Sundays\nClosed on Sundays."),
        (("Padaria Lusa", "Delivery"), "Padaria Lusa › Delivery\nWe deliver within Lisbon."),
        (("Padaria Lusa", "Appendix"), "Padaria Lusa › Appendix\nCompany details."),
    ]
    assert SEPARATOR == " › "
    assert all(c.tokens == counter.count(c.text) for c in chunks)


def test_an_h1_other_than_the_title_stays_in_the_path(counter: TokenCounter) -> None:
    chunks = chunk_document("bakery.md", NESTED, counter)
    assert chunks[0].path == ("bakery.md", "Padaria Lusa")
    assert chunks[2].text.startswith("bakery.md › Padaria Lusa › Opening hours › Sundays\n")


def test_text_without_headings_has_the_title_as_its_path(counter: TokenCounter) -> None:
    text = "\n\n".join(" ".join(sentences(6, f"topic {n}")) for n in range(6))
    chunks = chunk_document("notes.txt", text, counter)
    assert len(chunks) > 1
    assert all(c.path == ("notes.txt",) and c.text.startswith("notes.txt\n") for c in chunks)


def test_a_bold_line_above_text_is_a_subheading(counter: TokenCounter) -> None:
    chunks = chunk_document("Shop", "## Visit\n\n**Opening hours**\n\nMon to Fri.\n\n**Parking**\n\nBehind.", counter)
    assert [c.text for c in chunks] == ["Shop › Visit › Opening hours\nMon to Fri.", "Shop › Visit › Parking\nBehind."]


def test_a_long_section_splits_within_bounds_with_overlap(counter: TokenCounter) -> None:
    paragraphs = [" ".join(sentences(40)[n:n + 5]) for n in range(0, 40, 5)]
    markdown = "# Doc\n\n## Long section\n\n" + "\n\n".join(paragraphs)
    chunks = chunk_document("Doc", markdown, counter, max_tokens=200, min_tokens=120, overlap_tokens=30)
    assert len(chunks) >= 3
    assert all(c.text.startswith("Doc › Long section\n") for c in chunks)
    assert all(c.tokens <= 200 for c in chunks)
    assert all(c.tokens >= 120 for c in chunks[:-1])
    for before, after in zip(chunks, chunks[1:]):
        last = re.split(r"(?<=\.) ", body(before))[-1]
        assert last in body(after)
        shared = body(after)[:body(after).index(last) + len(last)]
        assert body(before).endswith(shared) and counter.count(shared) <= 30  # overlap, and a small one
    joined = " ".join(body(c) for c in chunks)
    assert all(s in joined for s in sentences(40))


def test_one_huge_paragraph_splits_at_sentences(counter: TokenCounter) -> None:
    chunks = chunk_document("Doc", " ".join(sentences(60)), counter, overlap_tokens=0)
    assert all(c.tokens <= 200 for c in chunks) and all(c.tokens >= 120 for c in chunks[:-1])
    assert all(body(c).startswith("Sentence ") and body(c).endswith("ovens.") for c in chunks)
    assert " ".join(body(c) for c in chunks) == " ".join(sentences(60))


def test_a_short_paragraph_before_a_long_one_is_filled_up_to_min_tokens(counter: TokenCounter) -> None:
    short = "Opening words about the bakery, its history and its people, told briefly."
    long = " ".join(sentences(14))  # fits a chunk alone, but not after the short one
    assert counter.count(f"Doc\n{long}") <= 200 < counter.count(f"Doc\n{short}\n\n{long}")
    chunks = chunk_document("Doc", f"{short}\n\n{long}", counter)
    assert chunks[0].text.startswith(f"Doc\n{short}\n\nSentence 0 says")
    assert all(c.tokens >= 120 for c in chunks[:-1]) and all(c.tokens <= 200 for c in chunks)


def test_text_without_sentence_ends_splits_at_words_then_characters(counter: TokenCounter) -> None:
    words = chunk_document("Doc", "word " * 1500, counter, overlap_tokens=0)
    assert len(words) > 1 and all(c.tokens <= 200 for c in words)
    assert sum(body(c).split().count("word") for c in words) == 1500
    blob = "x7Qz" * 2000
    pieces = chunk_document("Doc", blob, counter)
    assert all(c.tokens <= 200 for c in pieces)
    assert "".join(body(c) for c in pieces) == blob


def test_a_chunk_never_spans_two_sections(counter: TokenCounter) -> None:
    chunks = chunk_document("Doc", "## A\n\nShort one.\n\n## B\n\nShort two.", counter)
    assert [c.text for c in chunks] == ["Doc › A\nShort one.", "Doc › B\nShort two."]


FAQ = """# FAQ

**Do you deliver?**

Yes, within Lisbon.

Orders above €20 travel free.

**Can I pay by card?**

Yes, all cards.

Q: Do you bake gluten-free bread?
A: Only on Fridays.

## Are you open on Sundays?

No, we rest on Sundays.
"""


def test_each_faq_question_stays_with_its_answer(counter: TokenCounter) -> None:
    chunks = chunk_document("FAQ", FAQ, counter)
    assert [c.text for c in chunks] == [
        "FAQ\nDo you deliver?\nYes, within Lisbon.\n\nOrders above €20 travel free.",
        "FAQ\nCan I pay by card?\nYes, all cards.",
        "FAQ\nQ: Do you bake gluten-free bread?\nA: Only on Fridays.",
        "FAQ › Are you open on Sundays?\nNo, we rest on Sundays.",
    ]


def test_a_long_answer_repeats_its_question_on_each_part(counter: TokenCounter) -> None:
    answer = "\n\n".join(" ".join(sentences(40, "delivery")[n:n + 4]) for n in range(0, 40, 4))
    chunks = chunk_document("FAQ", f"**Do you deliver to Porto?**\n\n{answer}", counter)
    assert len(chunks) > 1
    assert all(c.text.startswith("FAQ\nDo you deliver to Porto?\n") for c in chunks)
    assert all(c.tokens <= 200 for c in chunks)
    joined = " ".join(c.text for c in chunks)
    assert all(s in joined for s in sentences(40, "delivery"))


def test_an_answer_under_max_tokens_is_not_split_at_the_target(counter: TokenCounter) -> None:
    answer = " ".join(sentences(9, "delivery"))
    chunk, = chunk_document("FAQ", f"## Do you deliver?\n\n{answer}", counter, target_tokens=100, max_tokens=200)
    assert 100 < chunk.tokens <= 200


TABLE = """# Menu

## Prices

| Product | Size | Price |
|---|---|---|
| Pastel de nata | Single | €1.20 |
| Bolo de arroz |  | €1.10 |
"""


def test_table_rows_become_column_value_lines_under_the_table_title(counter: TokenCounter) -> None:
    chunk, = chunk_document("Menu", TABLE, counter)
    assert chunk.path == ("Menu", "Prices")
    assert chunk.text == ("Menu › Prices\nProduct: Pastel de nata\nSize: Single\nPrice: €1.20\n\n"
                          "Product: Bolo de arroz\nPrice: €1.10")


def test_a_table_without_header_row_names_its_columns(counter: TokenCounter) -> None:
    chunk, = chunk_document("Hours", "| Mon | 8-19 |\n| Sat | 9-13 |", counter)
    assert chunk.text == "Hours\nColumn 1: Mon\nColumn 2: 8-19\n\nColumn 1: Sat\nColumn 2: 9-13"


def test_a_lead_in_line_ending_with_a_colon_titles_its_table(counter: TokenCounter) -> None:
    markdown = "## Shop\n\nWe bake daily.\n\nCake prices:\n\n| Cake | Price |\n|---|---|\n| Lemon | €9 |"
    chunks = chunk_document("Menu", markdown, counter)
    assert [c.text for c in chunks] == ["Menu › Shop\nWe bake daily.", "Menu › Shop › Cake prices\nCake: Lemon\nPrice: €9"]


def test_many_rows_are_grouped_up_to_max_tokens_and_never_split(counter: TokenCounter) -> None:
    rows = "\n".join(f"| Item {n} | Box of {n} | €{n}.50 |" for n in range(80))
    chunks = chunk_document("Menu", f"## Prices\n\n| Product | Size | Price |\n|---|---|---|\n{rows}", counter)
    assert len(chunks) > 1
    assert all(c.text.startswith("Menu › Prices\nProduct: Item ") and c.tokens <= 200 for c in chunks)
    assert all(c.tokens > 150 for c in chunks[:-1])  # filled up to max_tokens, not the target
    every_row = [row for c in chunks for row in body(c).split("\n\n")]
    assert every_row == [f"Product: Item {n}\nSize: Box of {n}\nPrice: €{n}.50" for n in range(80)]


def test_a_list_stays_with_its_lead_in(counter: TokenCounter) -> None:
    markdown = "## Breads\n\nWe bake every day.\n\nOur breads:\n\n- Sourdough\n- Broa de milho\n\nAll organic."
    chunk, = chunk_document("Menu", markdown, counter)
    assert chunk.text == "Menu › Breads\nWe bake every day.\n\nOur breads:\n- Sourdough\n- Broa de milho\n\nAll organic."


def test_a_long_list_keeps_its_lead_in_with_the_first_item(counter: TokenCounter) -> None:
    items = "\n".join(f"- Bread number {n}, baked with flour from the mill of {n} villages" for n in range(60))
    chunks = chunk_document("Menu", f"## Breads\n\nOur breads:\n\n{items}", counter)
    assert len(chunks) > 1 and all(c.tokens <= 200 for c in chunks)
    assert body(chunks[0]).startswith("Our breads:\n- Bread number 0,")
    joined = "\n".join(body(c) for c in chunks)
    assert all(f"- Bread number {n}," in joined for n in range(60))


def test_whitespace_is_normalised_and_no_chunk_is_empty(counter: TokenCounter) -> None:
    markdown = "# Doc\n\n## Empty\n\n## Spaces\n\nSome   text\twith  **bold**\n   spread  out.\n\n\n\n## Also empty\n"
    chunks = chunk_document("Doc", markdown, counter)
    assert [c.text for c in chunks] == ["Doc › Spaces\nSome text with bold spread out."]
    assert chunk_document("Doc", "# Doc\n\n## Only headings\n", counter) == []


def test_a_huge_heading_is_cut_so_content_still_fits(counter: TokenCounter) -> None:
    chunks = chunk_document("Doc", "## " + "very long heading " * 60 + "\n\nThe content.", counter)
    assert len(chunks) == 1 and chunks[0].tokens <= 200 and chunks[0].text.endswith("\nThe content.")
    assert len(chunks[0].path[1]) <= 80


def test_output_is_deterministic(counter: TokenCounter) -> None:
    markdown = NESTED + FAQ + TABLE + " ".join(sentences(50))
    assert chunk_document("Doc", markdown, counter) == chunk_document("Doc", markdown, counter)
