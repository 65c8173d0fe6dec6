"""REPLY_MODE=rest: the webhook answers at once; the reply goes out through the real twilio
client to a local stand-in of the Messages API; delivery failures come back signed."""

from __future__ import annotations

import time

import pytest

from bot import create_app
from bot.dev.standin import StandinModel
from bot.dev.twilio_standin import TwilioStandin
from bot.observability.metrics import DELIVERY_FAILURES
from tests.conftest import ACCOUNT, AUTH_TOKEN, USER, inbound_form, new_sid, sign

pytestmark = pytest.mark.integration

PUBLIC = "https://bot.example.com"
SENDER = "whatsapp:+14155238886"


@pytest.fixture
def rest(make_settings, redis_client, model, twilio: TwilioStandin):  # type: ignore[no-untyped-def]
    app = create_app(make_settings(REPLY_MODE="rest", TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                                   PUBLIC_BASE_URL=PUBLIC))
    client = app.test_client()

    def post(body: str, sid: str | None = None, path: str = "/whatsapp", form: dict[str, str] | None = None,
             token: str = AUTH_TOKEN):  # type: ignore[no-untyped-def]
        form = form or inbound_form(body, sid=sid)
        signature = sign(form, url=f"{PUBLIC}{path}", token=token)
        return client.post(path, data=form, headers={"X-Twilio-Signature": signature})

    yield post
    app.extensions["bot.replier"].close()


def test_the_webhook_answers_at_once_and_the_reply_goes_by_api(rest, model: StandinModel, twilio, services) -> None:  # type: ignore[no-untyped-def]
    model.gate.clear()  # the model holds its answer until the webhook has answered
    try:
        response = rest("Where should I stay in Lisbon for a week in May?")
        assert response.status_code == 200 and b"<Message>" not in response.data  # answered before the model
        assert twilio.messages() == []
    finally:
        model.gate.set()
    [sent] = twilio.wait_for(1)
    assert sent["From"] == SENDER and sent["To"] == f"whatsapp:{USER}"  # from the number written to
    assert "canned reply" in sent["Body"] and sent["StatusCallback"] == f"{PUBLIC}/whatsapp/status"
    assert len(services.store.load(USER).recent) == 1  # stored as in TwiML mode


def test_a_long_reply_is_split_and_a_redelivery_sends_nothing(rest, model: StandinModel, twilio) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": ("A sentence of a long answer about Lisbon. " * 90).strip()})
    sid = new_sid()
    rest("Tell me everything about Lisbon, please.", sid=sid)
    sent = twilio.wait_for(3)
    assert len(sent) == 3 and all(len(m["Body"]) <= 1600 for m in sent)
    rest("Tell me everything about Lisbon, please.", sid=sid)  # Twilio redelivers
    time.sleep(0.5)
    assert len(twilio.messages()) == 3 and len(model.requests()) == 1


def test_a_model_failure_sends_the_fallback_and_an_api_error_is_logged(rest, model: StandinModel, twilio) -> None:  # type: ignore[no-untyped-def]
    model.script({"status": 500}, {"status": 500})
    rest("Where should I eat tonight in Porto?")
    [sent] = twilio.wait_for(1)
    assert sent["Body"].startswith("Sorry")
    twilio.fail_next(400, 21211)
    rest("And tomorrow?")
    time.sleep(0.5)
    assert len(twilio.messages()) == 1  # refused by the API: logged, nothing retried blindly


def test_failed_deliveries_are_counted_from_signed_status_callbacks(rest) -> None:  # type: ignore[no-untyped-def]
    before = DELIVERY_FAILURES.labels(status="undelivered", error_code="63016")._value.get()
    form = {"MessageSid": new_sid(), "MessageStatus": "undelivered", "ErrorCode": "63016", "AccountSid": ACCOUNT}
    assert rest("", path="/whatsapp/status", form=form).status_code == 204
    assert DELIVERY_FAILURES.labels(status="undelivered", error_code="63016")._value.get() - before == 1
    forged = rest("", path="/whatsapp/status", form=form, token="not-the-token-0123456789")
    assert forged.status_code == 403
    assert DELIVERY_FAILURES.labels(status="undelivered", error_code="63016")._value.get() - before == 1


def test_a_429_is_tried_again_and_a_full_process_answers_busy_itself(  # type: ignore[no-untyped-def]
    make_settings, redis_client, model: StandinModel, twilio
) -> None:
    from bot.conversation.replies import BUSY_REPLY

    app = create_app(make_settings(REPLY_MODE="rest", TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                                   PUBLIC_BASE_URL=PUBLIC, MODEL_CONCURRENCY=1))
    client = app.test_client()

    def post(body: str, user: str):  # type: ignore[no-untyped-def]
        form = inbound_form(body, user=user)
        return client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form, url=f"{PUBLIC}/whatsapp")})

    twilio.fail_next(429, 20429)
    post("Where should I stay in Lisbon?", USER)
    assert len(twilio.wait_for(1)) == 1  # sent on the second try
    replier = app.extensions["bot.replier"]
    deadline = time.monotonic() + 5
    while replier._in_flight and time.monotonic() < deadline:  # its thread ends just after the send
        time.sleep(0.01)
    model.gate.clear()  # the model answers nothing until the six posts are in (a timed wait was flaky)
    # The four shed at the model's one slot send their busy reply at once: held at the Messages
    # API, they keep their reply threads until the sixth post is in, on a machine of any speed.
    twilio.latency_s = 3.0
    try:
        answers = [post(f"Question {i} about Porto?", f"+1415555{i:04d}").get_data(as_text=True) for i in range(6)]
    finally:
        model.gate.set()
        twilio.latency_s = 0.0
    assert BUSY_REPLY.split("'")[0] in answers[-1]  # 1 + 4 reply threads taken: the 6th is told at once
    assert all("<Message>" not in a for a in answers[:5])
    app.extensions["bot.replier"].close()
