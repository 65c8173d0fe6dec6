"""A whole handover through the console: take over, the user's messages on the page (and in
the JSON it polls) with no model call, a reply through the Messages API stand-in, a 63016
shown as not delivered and why, hand back, and the bot answering again knowing what was said."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from bot import create_app
from bot.dev.standin import StandinModel
from bot.dev.twilio_standin import TwilioStandin
from bot.storage.keys import HANDOVER_LOG_PREFIX, HANDOVER_PREFIX, user_key
from tests.conftest import ACCOUNT, USER, inbound_form, new_sid, sign
from tests.ops.console.support import SECRET, TOKEN, post, say, sign_in

pytestmark = pytest.mark.integration

PUBLIC = "http://localhost"  # the tests sign webhooks for this base URL
SENDER = "whatsapp:+14155238886"
USER_PAGE = f"/console/users/{USER}"
LOG_JSON = f"/console/users/{USER}/handover.json"


@pytest.fixture
def handover_app(make_settings, redis_client, model, twilio: TwilioStandin):  # type: ignore[no-untyped-def]
    """The console app, sending a person's replies to the Twilio stand-in."""
    return create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, TWILIO_ACCOUNT_SID=ACCOUNT,
                                    TWILIO_API_BASE_URL=twilio.url, PUBLIC_BASE_URL=PUBLIC))


@pytest.fixture
def operator(handover_app):  # type: ignore[no-untyped-def]
    client = handover_app.test_client()
    assert sign_in(client).status_code == 302
    return client


def act(client, action: str, data: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return post(client, f"{USER_PAGE}/handover/{action}", data, page=USER_PAGE)


def status_callback(app, sid: str, status: str, code: str = "") -> int:  # type: ignore[no-untyped-def]
    form = {"MessageSid": sid, "MessageStatus": status, "To": f"whatsapp:{USER}", "From": SENDER,
            "AccountSid": ACCOUNT, **({"ErrorCode": code} if code else {})}
    url = f"{PUBLIC}/whatsapp/status"
    return app.test_client().post("/whatsapp/status", data=form,
                                  headers={"X-Twilio-Signature": sign(form, url=url)}).status_code


def test_a_whole_handover(handover_app, operator, redis_client, model: StandinModel, twilio: TwilioStandin) -> None:  # type: ignore[no-untyped-def]
    model.script({"content": "The refund desk opens at nine; I can help you prepare the request."})
    assert say(handover_app, "I want a refund for my order 1234, who can help?").status_code == 200
    assert "Take over" in operator.get(USER_PAGE).get_data(as_text=True)

    with capture_logs() as logs:
        assert act(operator, "take").headers["Location"] == f"{USER_PAGE}#handover"
    assert redis_client.hget(user_key(HANDOVER_PREFIX, USER), "by") == "console:admin"
    assert [e["actor"] for e in logs if e["event"] == "audit.handover_taken"] == ["console:admin"]
    page = operator.get(USER_PAGE).get_data(as_text=True)
    assert "Taken over by <strong>admin</strong>" in page and "Hand back to the bot" in page
    assert 'data-poll-url="/console/users/+14155550100/handover.json"' in page and "poll.js" in page

    calls = len(model.requests())
    hostile = "<b>still there?</b> <img src=x onerror=alert(1)>"
    notice = say(handover_app, hostile)
    assert b"A person from our team will answer you here." in notice.data
    assert len(model.requests()) == calls  # no model call while paused
    polled = operator.get(f"{LOG_JSON}?since=0").get_json()
    assert polled["active"] and polled["next"] == 1
    assert [(e["role"], e["text"]) for e in polled["entries"]] == [("user", hostile)]
    assert operator.get(f"{LOG_JSON}?since=1").get_json()["entries"] == []
    page = operator.get(USER_PAGE).get_data(as_text=True)
    assert "&lt;b&gt;still there?&lt;/b&gt; &lt;img src=x onerror=alert(1)&gt;" in page and "<b>still there" not in page

    response = act(operator, "reply", {"text": "Hi, Dana here: I have refunded order 1234 today."})
    assert response.status_code == 302
    [sent] = twilio.wait_for(1)
    assert (sent["From"], sent["To"]) == (SENDER, f"whatsapp:{USER}")
    assert sent["Body"] == "Hi, Dana here: I have refunded order 1234 today."
    assert sent["StatusCallback"] == f"{PUBLIC}/whatsapp/status"
    polled = operator.get(f"{LOG_JSON}?since=1").get_json()
    assert [(e["role"], e["by"], e["status"]) for e in polled["entries"]] == [("person", "admin", "sent")]
    assert "Sent." in operator.get(USER_PAGE).get_data(as_text=True)

    assert status_callback(handover_app, sent["Sid"], "delivered") == 204
    assert operator.get(LOG_JSON).get_json()["statuses"] == [{"i": 1, "status": "delivered", "why": ""}]

    with capture_logs() as logs:
        act(operator, "back")
    assert not redis_client.exists(user_key(HANDOVER_PREFIX, USER))
    assert not redis_client.exists(user_key(HANDOVER_LOG_PREFIX, USER))
    assert [e["actor"] for e in logs if e["event"] == "audit.handover_returned"] == ["console:admin"]
    page = operator.get(USER_PAGE).get_data(as_text=True)
    assert "1 exchange(s) added to its context" in page
    assert "👤 admin: Hi, Dana here: I have refunded order 1234 today." in page and "Take over" in page
    assert operator.get(f"{LOG_JSON}?since=2").get_json()["folded"] is True

    model.script({"content": "Glad it is sorted; the money shows up within five days."})
    assert b"Glad it is sorted" in say(handover_app, "Thanks! When will I see the money?").data
    prompt = str(model.requests()[-1]["messages"])
    assert "I have refunded order 1234 today." in prompt and "still there?" in prompt


def test_a_reply_outside_the_24_hour_window_shows_why(handover_app, operator, twilio: TwilioStandin) -> None:  # type: ignore[no-untyped-def]
    say(handover_app, "Hello, is anybody there to help me with my booking?")
    act(operator, "take")
    act(operator, "reply", {"text": "Yes, how can I help?"})
    [sent] = twilio.wait_for(1)
    assert status_callback(handover_app, sent["Sid"], "undelivered", "63016") == 204
    [status] = operator.get(LOG_JSON).get_json()["statuses"]
    assert status["status"] == "undelivered" and "24-hour window" in status["why"] and "63016" in status["why"]
    page = operator.get(USER_PAGE).get_data(as_text=True)
    assert 'class="status failed">not delivered: outside WhatsApp&#39;s 24-hour window' in page

    # WhatsApp said the window is closed: the next reply waits for the user (docs/window.md).
    act(operator, "reply", {"text": "Are you still there?"})
    page = operator.get(USER_PAGE).get_data(as_text=True)
    assert "Held: the user&#39;s 24-hour window is closed" in page
    assert operator.get(LOG_JSON).get_json()["entries"][-1]["status"] == "held"
    assert "last delivery failed: outside WhatsApp&#39;s 24-hour window" in page

    say(handover_app, "Sorry, I was away")  # the window opens; both held replies go first
    twilio.fail_next(400, 63016)  # Twilio refuses the next one at once
    act(operator, "reply", {"text": "Welcome back!"})
    page = operator.get(USER_PAGE).get_data(as_text=True)
    assert "Not sent: outside WhatsApp&#39;s 24-hour window" in page
    entries = operator.get(LOG_JSON).get_json()["entries"]
    assert (entries[-1]["status"], entries[-1]["code"]) == ("failed", "63016")


def test_replies_are_refused_without_a_takeover_or_with_a_bad_text(handover_app, operator, twilio) -> None:  # type: ignore[no-untyped-def]
    say(handover_app, "Hello, is anybody there to help me with my booking?")
    act(operator, "reply", {"text": "Hi"})
    assert "Not sent: take the conversation over" in operator.get(USER_PAGE).get_data(as_text=True)
    act(operator, "take")
    for text, reason in (("   ", "a reply must be 1 to 1600 characters"), ("x" * 1601, "a reply must be 1 to 1600")):
        act(operator, "reply", {"text": text})
        assert reason in operator.get(USER_PAGE).get_data(as_text=True)
    assert twilio.messages() == []


def test_without_a_twilio_account_the_page_says_replies_cannot_be_sent(console_app, console) -> None:  # type: ignore[no-untyped-def]
    say(console_app, "Hello, is anybody there to help me with my booking?")
    post(console, f"{USER_PAGE}/handover/take", page=USER_PAGE)
    page = console.get(USER_PAGE).get_data(as_text=True)
    assert "Replies need TWILIO_ACCOUNT_SID" in page and "disabled" in page
    post(console, f"{USER_PAGE}/handover/reply", {"text": "Hi"}, page=USER_PAGE)
    assert "Not sent: replies need TWILIO_ACCOUNT_SID" in console.get(USER_PAGE).get_data(as_text=True)


def test_the_poll_is_read_only_and_needs_a_session(handover_app, operator, redis_client) -> None:  # type: ignore[no-untyped-def]
    act(operator, "take")
    form = inbound_form("Anyone?", sid=new_sid())
    handover_app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    before = {k: redis_client.dump(k) for k in redis_client.scan_iter(match="*14155550100*")}
    for _ in range(3):
        assert operator.get(LOG_JSON).status_code == 200
    assert {k: redis_client.dump(k) for k in redis_client.scan_iter(match="*14155550100*")} == before
    anonymous = handover_app.test_client()
    assert anonymous.get(LOG_JSON).status_code == 302
    assert operator.post(LOG_JSON).status_code == 405
