"""The reply box once the user's 24-hour window has closed, in the browser at desktop and
phone width (docs/window.md, Templates): it says why, offers the account's approved templates
with their variables, and sends one; the user's page lists their reminders and cancels one."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import expect

from bot import create_app
from bot.dev.twilio_answers import TEMPLATES
from bot.storage.keys import WINDOW_PREFIX, user_key
from tests.browser.pages import UsersPage, shoot, sign_in, trouble, user_writes
from tests.conftest import ACCOUNT, USER
from tests.ops.console.support import SECRET, TOKEN

pytestmark = pytest.mark.integration

APPOINTMENT = TEMPLATES[0]


@pytest.fixture
def base(serve, make_settings, redis_client, model, twilio):  # type: ignore[no-untyped-def]
    return serve(create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, TWILIO_ACCOUNT_SID=ACCOUNT,
                                          TWILIO_API_BASE_URL=twilio.url, TWILIO_CONTENT_BASE_URL=twilio.url,
                                          CONSOLE_POLL_S=1, REMINDERS=True)))


@pytest.mark.parametrize("width", [1280, 390])
def test_outside_the_window_an_operator_sends_a_template(open_page, base, redis_client, twilio, width) -> None:  # type: ignore[no-untyped-def]
    page = open_page(viewport={"width": width, "height": 900})
    user_writes(base, "Hello, is my order ready?")
    sign_in(page, base).go("Users")
    user = UsersPage(page, base).open_user(USER)
    user.take_over()
    redis_client.set(user_key(WINDOW_PREFIX, USER), f"{time.time() - 90_000:.3f}")  # a day and more later
    user.open()
    box = user.section("Handover")
    expect(box).to_contain_text("The user's 24-hour window is closed")
    form = box.locator("form").filter(has=page.get_by_role("button", name="Send appointment_reminder"))
    expect(form).to_contain_text("this is a reminder of your appointment at {{2}}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll
    shoot(page, f"window-closed-{width}")
    form.get_by_label("{{1}}").fill("Ana")
    form.get_by_label("{{2}}").fill("10:30")
    form.get_by_role("button", name="Send appointment_reminder").click()
    user.flash("Template appointment_reminder sent.")
    sent = twilio.wait_for(1)[-1]
    assert sent["ContentSid"] == APPOINTMENT["sid"] and json.loads(sent["ContentVariables"]) == {"1": "Ana",
                                                                                                  "2": "10:30"}
    expect(user.handover_message("Hi Ana, this is a reminder of your appointment at 10:30")).to_be_visible()
    assert trouble(page) == []


def test_the_users_reminders_are_listed_and_one_is_cancelled(page, base) -> None:  # type: ignore[no-untyped-def]
    user_writes(base, "remind me in 2 hours to call mum")
    sign_in(page, base).go("Users")
    user = UsersPage(page, base).open_user(USER)
    reminders = user.section("Reminders")
    expect(reminders).to_contain_text("call mum")
    expect(reminders).to_contain_text("waiting")
    reminders.get_by_role("button", name="Cancel").click()
    user.flash("Cancelled the reminder")
    expect(user.section("Reminders")).to_contain_text("cancelled")
    assert trouble(page) == []
