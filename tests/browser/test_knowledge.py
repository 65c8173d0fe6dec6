"""The Knowledge page in the browser: an operator uploads a Markdown file through the form, sees
it listed, opens it, asks a question and sees its chunk injected, and removes it after typing
its id. A file the knowledge base cannot read is refused with the reason. Every change is
checked in Redis afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from bot import create_app
from bot.storage.keys import KB_DOCS_KEY
from tests.browser.pages import KnowledgePage, shoot, sign_in, trouble
from tests.ops.console.support import SECRET, TOKEN

pytestmark = pytest.mark.integration

HOURS = """# Opening hours

Our shop in Porto opens every day of the week.

## Weekdays

Monday to Friday we open at 08:00 and close at 19:30.

## Sundays

On Sunday we open at 09:00 and close at 18:00. The kitchen serves brunch until 15:00.
"""


def stored(redis_client: Any) -> list[str]:
    """The ids of the documents in Redis."""
    return sorted(redis_client.hkeys(KB_DOCS_KEY))


@pytest.mark.embeddings
def test_an_operator_adds_a_document_finds_it_in_a_search_and_removes_it(  # type: ignore[no-untyped-def]
        page, base, redis_client, tmp_path) -> None:
    hours = tmp_path / "opening-hours.md"
    hours.write_text(HOURS, encoding="utf-8")
    sign_in(page, base).go("Knowledge")
    knowledge = KnowledgePage(page, base)
    expect(page.get_by_role("heading", name="Knowledge", exact=True)).to_be_visible()
    expect(page.get_by_text("No documents yet")).to_be_visible()

    knowledge.add(hours, language="en")
    knowledge.flash("Added opening-hours (3 passages).")
    row = knowledge.document_row("Opening hours")
    for text in ("opening-hours", "markdown", "en", "opening-hours.md", "UTC"):
        expect(row).to_contain_text(text)
    assert stored(redis_client) == ["opening-hours"]

    knowledge.add(hours)  # the same file again changes nothing
    knowledge.flash("Unchanged opening-hours (3 passages)")

    knowledge.search("When do you open on Sunday?")
    expect(knowledge.results()).to_contain_text("Found by words and by meaning")
    # a question about the business gets its best passages, the one that answers among them
    sunday = knowledge.injected().filter(has_text="On Sunday we open at 09:00 and close at 18:00.")
    expect(sunday).to_have_count(1)
    expect(sunday.get_by_role("link", name="opening-hours#3")).to_be_visible()
    expect(knowledge.results()).to_contain_text("About the business")
    expect(knowledge.considered("opening-hours#3")).to_contain_text("given")
    expect(knowledge.results().get_by_role("columnheader", name="Margin", exact=True)).to_be_hidden()  # folded away
    knowledge.results().get_by_text("Technical detail").click()
    expect(knowledge.results().get_by_role("columnheader", name="Margin", exact=True)).to_be_visible()
    expect(page.get_by_label("Question")).to_have_value("When do you open on Sunday?")
    shoot(page, "knowledge")

    knowledge.search("Tell me a joke about penguins")
    expect(knowledge.results()).to_contain_text("Nothing would be given to the model: not about the business")
    expect(knowledge.injected()).to_have_count(0)

    knowledge.document_row("Opening hours").get_by_role("link", name="Opening hours").click()
    expect(page.get_by_role("heading", name="Opening hours", exact=True)).to_be_visible()
    expect(page.get_by_role("listitem").filter(has_text="opening-hours#3")).to_contain_text("brunch until 15:00")
    shoot(page, "knowledge_doc")
    page.get_by_role("link", name="Knowledge", exact=True).first.click()

    knowledge.remove("opening-hours", typed="opening")
    knowledge.flash("Nothing removed: type the document's id (opening-hours) exactly to confirm.")
    assert stored(redis_client) == ["opening-hours"]
    knowledge.remove("opening-hours")
    knowledge.flash("Removed opening-hours.")
    expect(page.get_by_text("No documents yet")).to_be_visible()
    assert stored(redis_client) == []
    assert trouble(page) == []


def test_a_file_the_knowledge_base_cannot_read_is_refused_with_the_reason(  # type: ignore[no-untyped-def]
        page, base, redis_client, tmp_path) -> None:
    program = tmp_path / "setup.exe"
    program.write_bytes(b"MZ\x90\x00" * 64)
    sign_in(page, base)
    knowledge = KnowledgePage(page, base).open()
    knowledge.add(program)
    knowledge.flash("Nothing added: setup.exe: only Markdown (.md), text (.txt), HTML (.html) and PDF (.pdf) "
                    "are read.")
    expect(page.get_by_role("alert")).to_be_visible()
    assert stored(redis_client) == []
    assert trouble(page) == []


def test_a_file_over_the_size_cap_gets_a_message(page, serve, make_settings, redis_client, model, tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = serve(create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, KNOWLEDGE_MAX_DOC_BYTES=1024)))
    huge = tmp_path / "huge.md"
    huge.write_text("# Huge\n\n" + "All day long we bake bread. " * 10_000, encoding="utf-8")
    sign_in(page, base)
    knowledge = KnowledgePage(page, base).open()
    knowledge.add(huge)
    knowledge.flash("Nothing added: the file is over KNOWLEDGE_MAX_DOC_BYTES (1.0 KB, 1,024 bytes).")
    assert stored(redis_client) == []
    assert trouble(page) == []
