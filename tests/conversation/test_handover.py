"""Human handover through the signed webhook (TwiML mode): while a person holds the
conversation the bot is silent and logs what the user says; the person's reply goes through
the Messages API stand-in; at hand-back (or when the takeover lapses) what was said becomes
pairs of the conversation that the next reply's prompt reads."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

import pytest
from PIL import Image
from structlog.testing import capture_logs

from bot import create_app
from bot.channels.twilio.sender import MessageSender, make_message_sender
from bot.dev.standin import StandinModel
from bot.dev.twilio_standin import TwilioStandin
from bot.services import Services
from bot.storage.handover import PERSON, USER as USER_ROLE, LogEntry
from bot.storage.keys import HANDOVER_LOG_PREFIX, HANDOVER_PREFIX, user_key
from bot.users.handover import NOT_ANSWERED, fold, hand_back, operator_reply, pairs_from_log, take_over
from bot.users.lifecycle import erase_user
from bot.users.memory import OperationError
from bot.users.reports import export_user, user_report
from tests.conftest import ACCOUNT, AUTH_TOKEN, USER, inbound_form, new_sid, sign

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

PUBLIC = "https://bot.example.com"
NOTICE = "A person from our team will answer you here."
WRITTEN_TO = "whatsapp:+14155238886"  # inbound_form's To


@dataclass
class Desk:
    """The app, its services, the sender of a person's replies, and a signed poster."""

    app: Any
    services: Services
    sender: MessageSender

    def post(self, body: str, sid: str | None = None, **extra: str) -> list[str]:
        """Post a signed inbound message; return the bodies of the TwiML reply's messages."""
        form = inbound_form(body, sid=sid, **extra)
        response = self.app.test_client().post(
            "/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form, url=f"{PUBLIC}/whatsapp")})
        assert response.status_code == 200
        return [m.text or "" for m in ElementTree.fromstring(response.data).iter("Message")]

    def status(self, sid: str, state: str, code: str = "", token: str = AUTH_TOKEN) -> int:
        """Post a signed status callback for a message to USER; return the HTTP status."""
        form = {"MessageSid": sid, "MessageStatus": state, "AccountSid": ACCOUNT, "From": WRITTEN_TO,
                "To": f"whatsapp:{USER}", **({"ErrorCode": code} if code else {})}
        response = self.app.test_client().post(
            "/whatsapp/status", data=form,
            headers={"X-Twilio-Signature": sign(form, url=f"{PUBLIC}/whatsapp/status", token=token)})
        return response.status_code

    def reply(self, text: str, operator: str = "ana") -> LogEntry:
        """Answer the user as a person, as the console does."""
        return operator_reply(self.services.users, self.services.handover, self.sender.send, USER, text, operator)


@pytest.fixture
def desk(make_settings, redis_client, model, twilio: TwilioStandin) -> Desk:  # type: ignore[no-untyped-def]
    settings = make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url, PUBLIC_BASE_URL=PUBLIC)
    app = create_app(settings)
    sender = app.extensions.get("bot.sender") or make_message_sender(settings)
    app.extensions["bot.sender"] = sender
    return Desk(app, app.extensions["bot.services"], sender)


def prompt_text(model: StandinModel) -> str:
    """Return the last reply request's messages as one string."""
    return json.dumps(model.requests()[-1]["messages"], ensure_ascii=False)


def test_a_message_during_a_handover_gets_the_notice_once_then_silence(desk: Desk, model: StandinModel) -> None:
    assert desk.post("Hi, can I change my booking for Friday?")  # the bot answers
    assert len(model.requests()) == 1
    with capture_logs() as logs:
        take_over(desk.services.users, desk.services.handover, USER, actor="console:ana", via="console")
    [audit] = [e for e in logs if e["event"] == "audit.handover_taken"]
    assert audit["actor"] == "console:ana" and USER not in json.dumps(audit) and audit["target"] == "+14*******00"
    with capture_logs() as logs:
        assert desk.post("I would rather talk to a person.") == [NOTICE]
    assert desk.post("Are you there?") == []  # no reply at all
    assert desk.post("Hello???") == []
    assert len(model.requests()) == 1  # no model call during the handover
    assert [(e.role, e.text) for e in desk.services.handover.entries(USER)] == [
        ("user", "I would rather talk to a person."), ("user", "Are you there?"), ("user", "Hello???")]
    [event] = [e for e in logs if e["event"] == "handover.message"]
    assert event["notified"] is True and "person" not in json.dumps(event)  # no body at info
    assert len(desk.services.store.load(USER).recent) == 1  # nothing stored as a pair yet


def test_a_redelivery_during_a_handover_is_logged_once(desk: Desk, model: StandinModel) -> None:
    take_over(desk.services.users, desk.services.handover, USER, actor="cli", via="cli")
    sid = new_sid()
    assert desk.post("Where is my parcel?", sid=sid) == [NOTICE]
    desk.post("Where is my parcel?", sid=sid)  # Twilio redelivers
    assert len(desk.services.handover.entries(USER)) == 1 and model.requests() == []


def test_a_photo_reaches_the_person_as_its_caption(desk: Desk, twilio: TwilioStandin, model: StandinModel) -> None:
    take_over(desk.services.users, desk.services.handover, USER, actor="cli", via="cli")
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (10, 200, 30)).save(out, format="JPEG")
    sid = "MM" + new_sid()[2:]
    url = twilio.add_media(sid, out.getvalue(), "image/jpeg")
    desk.post("The box arrived like this", sid=sid, NumMedia="1", MediaContentType0="image/jpeg", MediaUrl0=url)
    assert [e.text for e in desk.services.handover.entries(USER)] == ["[Photo] The box arrived like this"]
    assert model.requests() == []


def test_the_persons_reply_goes_from_the_number_written_to_and_hand_back_folds_the_log(
    desk: Desk, model: StandinModel, twilio: TwilioStandin
) -> None:
    desk.post("Hello, I ordered a lamp last week.")
    take_over(desk.services.users, desk.services.handover, USER, actor="console:ana", via="console")
    desk.post("My parcel 4471 never arrived.")
    desk.post("It was a gift <script>alert(1)</script>")
    entry = desk.reply("So sorry! We are sending a new one today.")
    [sent] = twilio.wait_for(1)
    assert sent["From"] == WRITTEN_TO and sent["To"] == f"whatsapp:{USER}"
    assert sent["Body"] == "So sorry! We are sending a new one today."
    assert sent["StatusCallback"] == f"{PUBLIC}/whatsapp/status"
    assert (entry.sid, entry.status, entry.by) == (sent["Sid"], "sent", "ana")
    desk.post("Thank you!")
    with capture_logs() as logs:
        assert hand_back(desk.services.users, desk.services.handover, USER, actor="console:ana", via="console") == 2
    assert [e["pairs"] for e in logs if e["event"] == "audit.handover_returned"] == [2]
    assert desk.services.handover.get(USER) is None and desk.services.handover.entries(USER) == []
    recent = desk.services.store.load(USER).recent
    assert [(p.user, p.assistant) for p in recent[-2:]] == [
        ("My parcel 4471 never arrived.\nIt was a gift <script>alert(1)</script>",
         "👤 ana: So sorry! We are sending a new one today."),
        ("Thank you!", NOT_ANSWERED)]
    assert desk.post("When will the new lamp arrive?")  # the bot answers again
    prompt = prompt_text(model)
    assert "My parcel 4471 never arrived." in prompt and "👤 ana: So sorry! We are sending a new one today." in prompt
    assert len(model.requests()) == 2


def test_a_status_callback_marks_the_persons_message_undelivered_with_its_code(desk: Desk, twilio) -> None:  # type: ignore[no-untyped-def]
    desk.post("Hi")
    take_over(desk.services.users, desk.services.handover, USER, actor="console:ana", via="console")
    entry = desk.reply("Are you still interested in the offer?")
    assert desk.status(entry.sid, "undelivered", "63016", token="forged-token-0123456789abcdef") == 403
    assert desk.services.handover.entries(USER)[0].status == "sent"  # a forged callback changes nothing
    assert desk.status(entry.sid, "undelivered", "63016") == 204
    [logged] = desk.services.handover.entries(USER)
    assert (logged.status, logged.code) == ("undelivered", "63016")
    assert desk.status(entry.sid, "delivered") == 204  # late and contradictory: the failure stays
    assert desk.services.handover.entries(USER)[0].status == "undelivered"
    report = user_report(desk.services.users, USER)
    assert report["handover_log"][0]["error_code"] == "63016"
    hand_back(desk.services.users, desk.services.handover, USER, actor="cli", via="cli")
    assert "offer" not in json.dumps([p.assistant for p in desk.services.store.load(USER).recent])  # never read


def test_a_refused_send_is_logged_failed_with_twilios_code(desk: Desk, twilio: TwilioStandin) -> None:
    desk.post("Hi")
    take_over(desk.services.users, desk.services.handover, USER, actor="console:ana", via="console")
    twilio.fail_next(400, 63016)
    entry = desk.reply("Hello from the team")
    assert (entry.sid, entry.status, entry.code) == ("", "failed", "63016")
    assert desk.services.handover.entries(USER)[0].code == "63016"


def test_a_reply_needs_a_takeover_a_number_written_to_and_a_sane_length(desk: Desk, twilio: TwilioStandin) -> None:
    with pytest.raises(OperationError, match="take the conversation over"):
        desk.reply("Hello")
    take_over(desk.services.users, desk.services.handover, USER, actor="cli", via="cli")
    with pytest.raises(OperationError, match="no number to answer from"):
        desk.reply("Hello")  # the user never wrote: nobody knows which of our numbers to use
    desk.post("Hi")
    for text in ("   ", "x" * 1601):
        with pytest.raises(OperationError, match="1 to 1600"):
            desk.reply(text)
    assert twilio.messages() == []


def test_a_lapsed_takeover_is_folded_at_the_next_message(desk: Desk, model: StandinModel, redis_client) -> None:  # type: ignore[no-untyped-def]
    take_over(desk.services.users, desk.services.handover, USER, actor="cli", via="cli")
    desk.post("I need the invoice for order 5521 please.")
    redis_client.delete(user_key(HANDOVER_PREFIX, USER))  # HANDOVER_TTL_HOURS went by
    assert desk.post("Hello? Anyone?")  # the bot answers again
    prompt = prompt_text(model)
    assert "I need the invoice for order 5521 please." in prompt and NOT_ANSWERED in prompt
    assert not redis_client.exists(user_key(HANDOVER_LOG_PREFIX, USER))
    assert [p.user for p in desk.services.store.load(USER).recent] == [
        "I need the invoice for order 5521 please.", "Hello? Anyone?"]


def test_export_shows_the_handover_and_erase_removes_it(desk: Desk, redis_client) -> None:  # type: ignore[no-untyped-def]
    take_over(desk.services.users, desk.services.handover, USER, actor="console:ana", via="console")
    desk.post("Please delete nothing yet, I am talking to Ana.")
    exported = export_user(desk.services.users, USER)
    assert exported["handover"]["by"] == "console:ana" and exported["handover"]["expires_at"] > exported["handover"]["since"]
    assert [e["text"] for e in exported["handover_log"]] == ["Please delete nothing yet, I am talking to Ana."]
    keys = {k["key"] for k in exported["keys"]}
    assert {user_key(HANDOVER_PREFIX, USER), user_key(HANDOVER_LOG_PREFIX, USER)} <= keys
    erase_user(desk.services.users, USER, "cli", via="cli")
    assert not redis_client.exists(user_key(HANDOVER_PREFIX, USER), user_key(HANDOVER_LOG_PREFIX, USER))


def test_the_number_written_to_is_kept_for_replies(desk: Desk) -> None:
    desk.post("Hi", To="whatsapp:+14155550199")
    assert desk.services.store.load(USER).reply_from == "whatsapp:+14155550199"


def test_two_folds_never_store_the_log_twice(desk: Desk) -> None:
    desk.services.handover.append(USER, LogEntry(USER_ROLE, "one message", 1.0))
    assert fold(desk.services.users, desk.services.handover, USER) == 1
    assert fold(desk.services.users, desk.services.handover, USER) == 0
    assert len(desk.services.store.load(USER).recent) == 1


def test_pairs_from_the_log() -> None:
    log = [
        LogEntry(PERSON, "Hi, this is Ana from support.", 1.0, by="ana", status="read"),
        LogEntry(USER_ROLE, "Hi Ana", 2.0),
        LogEntry(USER_ROLE, "My order is late", 3.0),
        LogEntry(PERSON, "Never delivered", 4.0, by="ana", status="failed", code="63016"),
        LogEntry(USER_ROLE, "Hello?", 5.0),
        LogEntry(PERSON, "It ships today", 6.0, by="bo", status="delivered"),
    ]
    assert [(p.user, p.assistant, p.ts) for p in pairs_from_log(log)] == [
        ("(no message)", "👤 ana: Hi, this is Ana from support.", 1.0),
        ("Hi Ana\nMy order is late\nHello?", "👤 bo: It ships today", 6.0),
    ]
    assert pairs_from_log([]) == []
