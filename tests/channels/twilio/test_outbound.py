"""Replies over WhatsApp's 1600 characters are split at natural boundaries."""

from xml.etree import ElementTree

from bot.channels.twilio.outbound import MAX_MESSAGE_CHARS, render, split_message


def messages(xml: str) -> list[str]:
    return [m.text or "" for m in ElementTree.fromstring(xml).iter("Message")]


def test_short_reply_is_one_message() -> None:
    assert messages(render("Hello there!")) == ["Hello there!"]


def test_empty_reply_renders_no_message() -> None:
    assert messages(render("")) == []


def test_splits_at_paragraphs_first() -> None:
    first, second = "A" * 1000, "B" * 1000
    assert split_message(f"{first}\n\n{second}") == [first, second]


def test_packs_small_paragraphs_together() -> None:
    paragraphs = [f"Paragraph {i}. " + "x" * 300 for i in range(8)]
    chunks = split_message("\n\n".join(paragraphs))
    assert len(chunks) == 2
    assert all(len(c) <= MAX_MESSAGE_CHARS for c in chunks)
    assert "\n\n".join(chunks) == "\n\n".join(paragraphs)


def test_long_paragraph_splits_at_sentences() -> None:
    sentences = [f"Sentence number {i} is here." + " filler" * 20 + "." for i in range(30)]
    text = " ".join(sentences)
    chunks = split_message(text)
    assert len(chunks) > 1
    assert all(len(c) <= MAX_MESSAGE_CHARS for c in chunks)
    assert all(c.endswith(".") for c in chunks)
    assert " ".join(chunks) == text


def test_unbroken_text_is_cut_hard() -> None:
    text = "x" * 4000
    chunks = split_message(text)
    assert [len(c) for c in chunks] == [1600, 1600, 800]


def test_special_characters_survive_twiml() -> None:
    text = "Tom & Jerry <3 \"quotes\" 'apostrophes' émojis 🎉"
    assert messages(render(text)) == [text]
