"""A user's page in the browser: the users who wrote are listed; a user's page shows their
summary, facts and messages, what they wrote as text and never as markup; an operator edits and
deletes a fact, resets the conversation and erases the user (after typing the number). Every
change is checked in Redis afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from bot.storage.keys import CONTEXT_PREFIX, FACTS_PREFIX, user_key
from bot.storage.records import Fact
from tests.browser.pages import UserPage, UsersPage, shoot, sign_in, stored_about, trouble, user_writes
from tests.conftest import USER, fact, stored_facts

pytestmark = pytest.mark.integration

OTHER = "+447700900123"
SCRIPT = "<script>window.__pwned=1</script>"
IMAGE = '<img src=x onerror="window.__pwned=2">'


def remember(redis_client: Any, *facts: Fact, user: str = USER) -> None:
    """Store facts as extraction would."""
    redis_client.hset(user_key(FACTS_PREFIX, user), mapping={f.key: f.to_json() for f in facts})


def stored_fact(redis_client: Any, key: str) -> Fact | None:
    raw = stored_facts(redis_client).get(key)  # packed once the console wrote them
    return Fact.from_json(key, raw) if raw is not None else None


def test_the_users_list_shows_who_wrote_and_a_users_page_their_summary_facts_and_messages(  # type: ignore[no-untyped-def]
        page, base, redis_client, model) -> None:
    model.script({"content": "Alfama and Chiado are both lovely places to stay in Lisbon."})
    user_writes(base, "Where should I stay in Lisbon for a week in May?")
    user_writes(base, "Hello, which trains go from Porto to Braga?", user=OTHER)
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), "summary", "Plans a week in Lisbon in May.")
    remember(redis_client, fact("city", "Leeds", confidence=0.92, category="location", provenance="#1"))

    sign_in(page, base).go("Users")
    users = UsersPage(page, base)
    assert users.numbers() == [OTHER, USER]  # newest activity first
    shoot(page, "users")

    user = users.open_user(USER)
    expect(page.get_by_role("heading", name=USER)).to_be_visible()
    expect(user.section("Conversation").get_by_text("Plans a week in Lisbon in May.")).to_be_visible()
    expect(user.conversation_message("Where should I stay in Lisbon for a week in May?")).to_contain_text("User · #1")
    expect(user.conversation_message("Alfama and Chiado are both lovely")).to_contain_text("Bot")
    expect(user.fact_row("city")).to_contain_text("Leeds")
    expect(user.fact_row("city")).to_contain_text("0.92")
    expect(page.get_by_text("Porto to Braga")).to_have_count(0)  # the other user's message is not here
    assert trouble(page) == []


def test_html_and_script_a_user_wrote_show_as_text_and_never_run(open_page, base, model) -> None:  # type: ignore[no-untyped-def]
    hostile = f"Hi {SCRIPT}{IMAGE} can you help?"
    model.script({"content": f"You wrote {SCRIPT}"})
    user_writes(base, hostile)

    # The page's CSP would stop an injected script by itself: look at the escaping without it.
    page = open_page(bypass_csp=True)
    sign_in(page, base)
    user = UserPage(page, base).open()

    expect(user.conversation_message("can you help?").locator(".text")).to_have_text(hostile)
    expect(user.conversation_message("You wrote")).to_contain_text(SCRIPT)
    expect(page.locator("main img")).to_have_count(0)
    expect(page.locator("main script")).to_have_count(0)
    assert page.evaluate("window.__pwned") is None
    assert trouble(page) == []


def test_an_operator_edits_a_fact_and_deletes_another(page, base, redis_client) -> None:  # type: ignore[no-untyped-def]
    user_writes(base, "I live in Leeds and I am vegetarian.")
    remember(redis_client, fact("city", "Leeds", category="location"), fact("diet", "vegetarian"))
    sign_in(page, base)
    user = UserPage(page, base).open()

    user.edit_fact("city", "York")

    user.flash("Saved the fact city.")
    expect(user.fact_row("city")).to_contain_text("York")
    saved = stored_fact(redis_client, "city")
    assert saved is not None and saved.value == "York"
    assert (saved.source, saved.provenance, saved.category) == ("operator", "console:admin", "location")

    user.delete_fact("diet")

    user.flash("Deleted the fact diet.")
    expect(user.fact_row("diet")).to_have_count(0)
    assert stored_fact(redis_client, "diet") is None
    assert stored_fact(redis_client, "city") is not None
    assert trouble(page) == []


def test_reset_clears_the_conversation_and_keeps_the_facts(page, base, redis_client) -> None:  # type: ignore[no-untyped-def]
    user_writes(base, "Which tram goes to the castle?")
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), "summary", "Asks about trams in Lisbon.")
    remember(redis_client, fact("diet", "vegetarian"))
    sign_in(page, base)
    user = UserPage(page, base).open()
    expect(user.conversation_message("Which tram goes to the castle?")).to_be_visible()

    user.reset()

    user.flash("Conversation cleared.")
    expect(user.section("Conversation")).to_contain_text("No summary yet.")
    expect(user.section("Conversation")).to_contain_text("No stored pairs.")
    context = redis_client.hgetall(user_key(CONTEXT_PREFIX, USER))
    assert context["recent_messages"] == "[]" and context["summary"] == ""
    assert stored_fact(redis_client, "diet") is not None
    assert trouble(page) == []


def test_erase_needs_the_number_typed_and_then_deletes_everything(page, base, redis_client) -> None:  # type: ignore[no-untyped-def]
    user_writes(base, "Please remember that my dog is called Rex.")
    remember(redis_client, fact("dog_name", "Rex"))
    before = stored_about(redis_client)
    assert user_key(FACTS_PREFIX, USER) in before and user_key(CONTEXT_PREFIX, USER) in before
    sign_in(page, base)
    user = UserPage(page, base).open()

    user.erase("+14155550199")  # not the user's number

    user.flash("Nothing erased: type the user's number exactly")
    assert stored_about(redis_client) == before

    user.erase(USER)

    user.flash("Erased a user:")
    assert page.url == f"{base}/console/users"
    expect(page.get_by_text("No users yet")).to_be_visible()
    assert stored_about(redis_client) == {}
    assert trouble(page) == []
