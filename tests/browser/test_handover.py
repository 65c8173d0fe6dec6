"""A whole handover in the browser: an operator (added with the store) takes a conversation
over; the user's next message gets no model call and shows on the page by itself (poll.js), as
text; the operator's reply goes out through the Messages API and shows as from a person; after
"Hand back" the bot answers again, knowing what the user and the person said."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from bot.dev.standin import StandinModel
from bot.dev.twilio_standin import TwilioStandin
from bot.storage.keys import HANDOVER_LOG_PREFIX, HANDOVER_PREFIX, user_key
from tests.browser.pages import UsersPage, shoot, sign_in, trouble, user_writes
from tests.conftest import USER
from tests.ops.console.support import OPERATOR, PASSWORD, add_operator

pytestmark = pytest.mark.integration

#: How long the page may take to show a new message: CONSOLE_POLL_S is 1 here, 3 by default.
POLL_WAIT_MS = 10_000
ASKED = "Is anybody there? <b>Order 1234</b> still has not come <img src=x onerror=\"window.__pwned=3\">"
ANSWERED = "Hi, this is Dana from the team: order 1234 ships today, tracking follows by e-mail."


def test_a_whole_handover(page, base, redis_client, model: StandinModel, twilio: TwilioStandin) -> None:  # type: ignore[no-untyped-def]
    add_operator(redis_client)  # dana, as `whatsapp-bot operators add dana` does
    model.script({"content": "Order 1234 left our warehouse on Monday; a colleague can look into it."})
    user_writes(base, "My order 1234 has not arrived, can a person help me?")
    sign_in(page, base, OPERATOR, PASSWORD).go("Users")
    user = UsersPage(page, base).open_user(USER)

    user.take_over()

    user.flash("You have taken this conversation over")
    expect(page.get_by_text(f"handed over to {OPERATOR}")).to_be_visible()
    assert redis_client.hget(user_key(HANDOVER_PREFIX, USER), "by") == f"console:{OPERATOR}"
    expect(user.section("Handover")).to_contain_text("No messages yet. New ones appear here by themselves.")

    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    calls = len(model.requests())
    notice = user_writes(base, ASKED)

    assert "A person from our team will answer you here." in notice
    assert len(model.requests()) == calls  # no model call while a person holds the conversation
    asked = user.handover_message("Is anybody there?")
    expect(asked).to_be_visible(timeout=POLL_WAIT_MS)
    expect(asked.locator(".text")).to_have_text(ASKED)  # inserted as text, not as markup
    expect(asked).to_contain_text("User ·")
    assert page.evaluate("window.__sameDocument") is True
    assert page.evaluate("window.__pwned") is None

    user.reply(ANSWERED)

    [sent] = twilio.wait_for(1)
    assert (sent["Body"], sent["To"], sent["From"]) == (ANSWERED, f"whatsapp:{USER}", "whatsapp:+14155238886")
    user.flash("Sent.")
    answered = user.handover_message("order 1234 ships today")
    expect(answered).to_contain_text(f"Team · {OPERATOR}")
    expect(answered.locator(".status")).to_have_text("sent")
    assert redis_client.llen(user_key(HANDOVER_LOG_PREFIX, USER)) == 2
    shoot(page, "user-handover")
    assert trouble(page) == []

    user.hand_back()

    user.flash("Handed back to the bot; 1 exchange(s) added to its context.")
    assert not redis_client.exists(user_key(HANDOVER_PREFIX, USER))
    assert not redis_client.exists(user_key(HANDOVER_LOG_PREFIX, USER))
    expect(user.conversation_message("left our warehouse on Monday")).to_contain_text("Bot")
    expect(user.conversation_message(f"👤 {OPERATOR}: {ANSWERED}")).to_contain_text("Team (handover)")
    expect(page.get_by_role("button", name="Take over")).to_be_visible()

    model.script({"content": "It should reach you within two days of shipping."})
    answer = user_writes(base, "Thanks! When will it arrive?")

    assert "It should reach you within two days of shipping." in answer
    prompt = json.dumps(model.requests()[-1]["messages"], ensure_ascii=False)
    assert "My order 1234 has not arrived" in prompt and "Is anybody there? <b>Order 1234</b>" in prompt
    assert f"👤 {OPERATOR}: {ANSWERED}" in prompt
    assert trouble(page) == []
