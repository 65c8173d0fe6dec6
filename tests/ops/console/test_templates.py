"""Outside the user's 24-hour window the console's reply box says why and offers templates
(docs/window.md, Templates): the configured ones and the account's approved ones, listed by
the twilio SDK through the Content API of the Twilio stand-in, each with its variables; one
sent goes by ContentSid with its ContentVariables, and the handover log shows what the user
reads."""

from __future__ import annotations

import json
import time

import pytest

from bot import create_app
from bot.dev.twilio_answers import TEMPLATES
from bot.dev.twilio_standin import TwilioStandin
from bot.storage.keys import WINDOW_PREFIX, user_key
from tests.conftest import ACCOUNT, USER
from tests.ops.console.support import SECRET, TOKEN, post, say, sign_in

pytestmark = pytest.mark.integration

USER_PAGE = f"/console/users/{USER}"
FOLLOW_UP = "HX" + "ef" * 16
APPOINTMENT, PENDING = TEMPLATES[0], TEMPLATES[3]


@pytest.fixture
def operator(make_settings, redis_client, model, twilio: TwilioStandin):  # type: ignore[no-untyped-def]
    app = create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, TWILIO_ACCOUNT_SID=ACCOUNT,
                                   TWILIO_API_BASE_URL=twilio.url, TWILIO_CONTENT_BASE_URL=twilio.url,
                                   TEMPLATES=f"follow_up={FOLLOW_UP}"))
    client = app.test_client()
    assert sign_in(client).status_code == 302
    say(app, "Hello, can someone check my order?")
    post(client, f"{USER_PAGE}/handover/take", page=USER_PAGE)
    return app, client


def close_window(redis_client) -> None:  # type: ignore[no-untyped-def]
    redis_client.set(user_key(WINDOW_PREFIX, USER), f"{time.time() - 90_000:.3f}")  # a day and more later


def test_inside_the_window_the_box_is_plain_and_outside_it_offers_the_templates(  # type: ignore[no-untyped-def]
        operator, redis_client) -> None:
    _app, client = operator
    page = client.get(USER_PAGE).get_data(as_text=True)
    assert "window is open until" in page and "Send a template" not in page
    close_window(redis_client)
    page = client.get(USER_PAGE).get_data(as_text=True)
    assert "24-hour window is closed" in page and "Send a template" in page and "held until they write" in page
    assert "follow_up" in page and "from the settings" in page  # configured, its text unknown
    assert "appointment_reminder" in page and "this is a reminder of your appointment at {{2}}" in page
    assert "approved on the account" in page and 'name="var_2"' in page
    assert PENDING["friendly_name"] not in page  # still waiting for WhatsApp's approval: not offered


def test_a_template_goes_by_its_content_sid_with_its_variables(operator, redis_client, twilio) -> None:  # type: ignore[no-untyped-def]
    app, client = operator
    close_window(redis_client)
    refused = post(client, f"{USER_PAGE}/handover/template", {"sid": APPOINTMENT["sid"], "var_1": "Ana", "var_2": ""},
                   page=USER_PAGE)
    assert refused.status_code == 302 and "fill every variable" in client.get(USER_PAGE).get_data(as_text=True)
    post(client, f"{USER_PAGE}/handover/template", {"sid": APPOINTMENT["sid"], "var_1": "Ana", "var_2": "10:30"},
         page=USER_PAGE)
    sent = twilio.messages()[-1]
    assert sent["ContentSid"] == APPOINTMENT["sid"] and "Body" not in sent
    assert json.loads(sent["ContentVariables"]) == {"1": "Ana", "2": "10:30"}
    entries = client.get(f"{USER_PAGE}/handover.json").get_json()["entries"]
    assert entries[-1]["text"] == "Hi Ana, this is a reminder of your appointment at 10:30. Reply to confirm."
    assert entries[-1]["status"] == "sent"
    post(client, f"{USER_PAGE}/handover/template", {"sid": FOLLOW_UP}, page=USER_PAGE)  # no variables
    assert twilio.messages()[-1]["ContentSid"] == FOLLOW_UP and "ContentVariables" not in twilio.messages()[-1]
    forged = post(client, f"{USER_PAGE}/handover/template", {"sid": "HX" + "00" * 16}, page=USER_PAGE)
    assert forged.status_code == 302 and "not one of the templates offered" in client.get(USER_PAGE).get_data(
        as_text=True)
    assert client.post(f"{USER_PAGE}/handover/template", data={"sid": FOLLOW_UP}).status_code == 400  # no CSRF


def test_a_user_who_sent_stop_is_offered_no_template(operator, redis_client, twilio) -> None:  # type: ignore[no-untyped-def]
    app, client = operator
    say(app, "STOP")
    close_window(redis_client)
    page = client.get(USER_PAGE).get_data(as_text=True)
    assert "They sent STOP" in page and "Send a template" not in page
    before = len(twilio.messages())
    post(client, f"{USER_PAGE}/handover/template", {"sid": FOLLOW_UP}, page=USER_PAGE)
    assert len(twilio.messages()) == before and "Not sent" in client.get(USER_PAGE).get_data(as_text=True)


def test_a_held_reply_after_a_template_sends_no_second_reopen_template(  # type: ignore[no-untyped-def]
        make_settings, redis_client, model, twilio: TwilioStandin) -> None:
    reopen = TEMPLATES[1]["sid"]
    app = create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, TWILIO_ACCOUNT_SID=ACCOUNT,
                                   TWILIO_API_BASE_URL=twilio.url, TWILIO_CONTENT_BASE_URL=twilio.url,
                                   TEMPLATE_REOPEN_SID=reopen))
    client = app.test_client()
    assert sign_in(client).status_code == 302
    say(app, "Olá, o meu pedido já está pronto?", user=USER)
    post(client, f"{USER_PAGE}/handover/take", page=USER_PAGE)
    close_window(redis_client)
    post(client, f"{USER_PAGE}/handover/template", {"sid": APPOINTMENT["sid"], "var_1": "Rui", "var_2": "18:00"},
         page=USER_PAGE)
    post(client, f"{USER_PAGE}/handover/reply", {"text": "O seu pedido está pronto."}, page=USER_PAGE)
    templates = [m["ContentSid"] for m in twilio.messages() if m.get("ContentSid")]
    assert templates == [APPOINTMENT["sid"]]  # the reply waits; the user has a template to answer already
    say(app, "Obrigado!", user=USER)
    assert twilio.messages()[-1]["Body"] == "O seu pedido está pronto."
