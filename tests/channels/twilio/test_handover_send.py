"""A handover with REPLY_MODE=rest: the notice goes by API once, silences send nothing, and a
person's reply takes the same Messages API path (client, retry, StatusCallback) as the bot's."""

from __future__ import annotations

import time

import pytest

from bot import create_app
from bot.channels.twilio.sender import MessageSender, make_message_sender
from bot.dev.standin import StandinModel
from bot.dev.twilio_standin import TwilioStandin
from bot.users.handover import hand_back, operator_reply, take_over
from tests.conftest import ACCOUNT, USER, inbound_form, sign

pytestmark = pytest.mark.integration

PUBLIC = "https://bot.example.com"
SENDER = "whatsapp:+14155238886"
NOTICE = "A person from our team will answer you here."


def test_a_handover_in_rest_mode(make_settings, redis_client, model: StandinModel, twilio: TwilioStandin) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(REPLY_MODE="rest", TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                             PUBLIC_BASE_URL=PUBLIC)
    app = create_app(settings)
    sender = app.extensions.get("bot.sender") or make_message_sender(settings)
    services = app.extensions["bot.services"]
    client = app.test_client()
    assert isinstance(app.extensions["bot.replier"].sender, MessageSender)  # one copy of the retry

    def post(body: str) -> None:
        form = inbound_form(body)
        response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form, url=f"{PUBLIC}/whatsapp")})
        assert response.status_code == 200 and b"<Message>" not in response.data

    try:
        take_over(services.users, services.handover, USER, actor="console:ana", via="console")
        post("Can I speak to someone about my refund?")
        [notice] = twilio.wait_for(1)
        assert notice["Body"] == NOTICE and notice["From"] == SENDER
        post("It was 40 euros.")
        time.sleep(0.5)
        assert len(twilio.messages()) == 1 and model.requests() == []  # silence: nothing sent, no model call
        entry = operator_reply(services.users, services.handover, sender.send, USER, "Refunded today.", "ana")
        person = twilio.wait_for(2)[1]
        assert (person["Body"], person["From"], person["To"]) == ("Refunded today.", SENDER, f"whatsapp:{USER}")
        assert person["StatusCallback"] == f"{PUBLIC}/whatsapp/status" and entry.sid == person["Sid"]
        assert hand_back(services.users, services.handover, USER, actor="console:ana", via="console") == 1
        post("Great, thanks. Anything else I should do?")
        bot = twilio.wait_for(3)[2]
        assert "canned reply" in bot["Body"] and len(model.requests()) == 1
        assert "It was 40 euros." in str(model.requests()[0]["messages"])
    finally:
        app.extensions["bot.replier"].close()


def test_the_rest_replier_and_a_persons_reply_share_one_sender(make_settings, twilio: TwilioStandin) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(REPLY_MODE="rest", TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url)
    assert make_message_sender(make_settings()) is None  # no account: nothing can be sent by API
    sender = make_message_sender(settings)
    assert isinstance(sender, MessageSender) and sender.status_callback is None  # no PUBLIC_BASE_URL
    twilio.fail_next(503, 20500)
    sid, code = sender.send(USER, SENDER, "Hello")  # a 5xx is tried once more
    assert sid is not None and code is None and "StatusCallback" not in twilio.messages()[0]
    twilio.fail_next(400, 21211)
    assert sender.send(USER, SENDER, "Hello") == (None, "21211")
