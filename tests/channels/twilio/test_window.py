"""WhatsApp's 24-hour window on every Messages API send (docs/window.md): outside it nothing
is sent, the message is held and the reopen template goes instead; when the user writes
again, what was held goes first, in order, once. Signed webhooks, the real Redis, the twilio
client to the Twilio stand-in."""

from __future__ import annotations

import time

import pytest

from bot import create_app
from bot.dev.twilio_standin import TwilioStandin
from bot.storage.keys import WINDOW_PREFIX, user_key
from bot.users.reports import export_user, user_report
from tests.conftest import ACCOUNT, USER, inbound_form, new_sid, sign

pytestmark = pytest.mark.integration

REOPEN = "HX" + "ab" * 16
FROM = "whatsapp:+14155238886"


@pytest.fixture
def app(make_settings, redis_client, model, twilio: TwilioStandin):  # type: ignore[no-untyped-def]
    return create_app(make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                                    TWILIO_MESSAGING_BASE_URL=twilio.url, TEMPLATE_REOPEN_SID=REOPEN))


def write(app, body: str, sid: str | None = None) -> str:  # type: ignore[no-untyped-def]
    form = inbound_form(body, USER, sid or new_sid())
    response = app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert response.status_code == 200
    return response.get_data(as_text=True)


def to_user(twilio: TwilioStandin) -> list[dict[str, str]]:
    return [m for m in twilio.messages() if m["To"] == f"whatsapp:{USER}"]


@pytest.mark.cluster
def test_outside_the_window_a_message_is_held_and_goes_first_when_the_user_writes(  # type: ignore[no-untyped-def]
        app, twilio: TwilioStandin, redis_client) -> None:
    write(app, "Hello, is the shop open on Sunday?")
    sender = app.extensions["bot.sender"]
    users = app.extensions["bot.services"].users
    assert user_report(users, USER)["window"]["open"]
    assert sender.send(USER, FROM, "Inside the window: sent")[0]  # sent at once
    redis_client.set(user_key(WINDOW_PREFIX, USER), f"{time.time() - 90_000:.3f}")  # a day and more later
    assert sender.send(USER, FROM, "Good morning! We open at 10 on Sunday.") == (None, "held")
    assert sender.send_reply(USER, FROM, "And we have gluten-free bread.").held
    sent = to_user(twilio)
    assert [m.get("Body") for m in sent] == ["Inside the window: sent", None]  # free text never went
    assert sent[-1]["ContentSid"] == REOPEN  # the reopen template, once for both
    report = user_report(users, USER)
    assert not report["window"]["open"] and [h["kind"] for h in report["held"]] == ["person", "reply"]
    assert "text" not in report["held"][0] and export_user(users, USER)["held"][0]["text"].startswith("Good morning")
    sid = new_sid()
    reply = write(app, "Thanks! See you Sunday", sid)
    assert [m.get("Body") for m in to_user(twilio)[2:]] == ["Good morning! We open at 10 on Sunday.",
                                                             "And we have gluten-free bread."]  # in order
    assert "<Message>" in reply  # then their own message is answered
    write(app, "Thanks! See you Sunday", sid)  # Twilio redelivers it: nothing is sent twice
    assert len(to_user(twilio)) == 4 and user_report(users, USER)["held"] == []
    assert user_report(users, USER)["window"]["open"]


def test_without_a_reopen_template_the_message_waits_silently(make_settings, redis_client, model, twilio) -> None:  # type: ignore[no-untyped-def]
    app = create_app(make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url))
    sender = app.extensions["bot.sender"]
    assert sender.send(USER, FROM, "Your order is ready") == (None, "held")  # never wrote: no window
    assert to_user(twilio) == []
    write(app, "hi")
    assert [m.get("Body") for m in to_user(twilio)] == ["Your order is ready"]


def test_a_persons_reply_outside_the_window_is_held_and_the_console_says_so(app, twilio, redis_client) -> None:  # type: ignore[no-untyped-def]
    from bot.users import handover as operations

    write(app, "I need a person, please")
    services = app.extensions["bot.services"]
    operations.take_over(services.users, services.handover, USER, "console:ana", via="console")
    redis_client.set(user_key(WINDOW_PREFIX, USER), f"{time.time() - 90_000:.3f}")
    entry = operations.operator_reply(services.users, services.handover, app.extensions["bot.sender"].send, USER,
                                      "Sorry for the wait: your order ships today.", "ana")
    assert entry.status == "held" and entry.code == "" and entry.delivered
    assert [m.get("Body") for m in to_user(twilio)] == [None]  # the reopen template only
    write(app, "ok thanks")
    assert [m.get("Body") for m in to_user(twilio)][1:] == ["Sorry for the wait: your order ships today."]


def status(app, form: dict[str, str]):  # type: ignore[no-untyped-def]
    from tests.conftest import BASE_URL

    return app.test_client().post("/whatsapp/status", data=form,
                                  headers={"X-Twilio-Signature": sign(form, url=f"{BASE_URL}/whatsapp/status")})


@pytest.mark.cluster
def test_a_63016_from_twilio_holds_the_text_for_the_users_next_message(app, twilio, redis_client) -> None:  # type: ignore[no-untyped-def]
    write(app, "Is my order ready?")
    sender = app.extensions["bot.sender"]
    sid, _ = sender.send(USER, FROM, "Yes: pick it up after 5 pm.")  # inside the window, as the bot believes
    assert sid
    response = status(app, {"MessageSid": sid, "MessageStatus": "undelivered", "ErrorCode": "63016",
                            "To": f"whatsapp:{USER}", "From": FROM, "AccountSid": ACCOUNT})
    assert response.status_code == 204
    users = app.extensions["bot.services"].users
    report = user_report(users, USER)
    assert not report["window"]["open"]  # WhatsApp said so: closed until the user writes
    assert report["delivery_failures"][0]["code"] == "63016" and report["delivery_failures"][0]["kind"] == "person"
    assert [h["kind"] for h in report["held"]] == ["person"]
    assert to_user(twilio)[-1].get("ContentSid") == REOPEN
    assert app.extensions["bot.services"].activity.deliveries_failed(24, time.time()) == {"63016": 1}  # the overview
    write(app, "hello?")
    assert to_user(twilio)[-1].get("Body") == "Yes: pick it up after 5 pm."  # the very text, once the user wrote


def test_a_user_who_opted_out_at_twilio_is_recorded_against_them(app, twilio) -> None:  # type: ignore[no-untyped-def]
    write(app, "hi")
    twilio.failures.append((400, 21610))  # "Attempt to send to unsubscribed recipient"
    assert app.extensions["bot.sender"].send(USER, FROM, "Our sale starts today") == (None, "21610")
    [failure] = user_report(app.extensions["bot.services"].users, USER)["delivery_failures"]
    assert failure["code"] == "21610"


@pytest.mark.parametrize("stop, start, said", [("STOP", "START", "Send START"), ("parar", "start", "Envie START"),
                                               ("Baja", "alta", "Envíe START")])
def test_stop_ends_every_message_the_business_starts_and_start_undoes_it(  # type: ignore[no-untyped-def]
        app, twilio, redis_client, stop: str, start: str, said: str) -> None:
    users = app.extensions["bot.services"].users
    sender = app.extensions["bot.sender"]
    write(app, "hello")
    redis_client.set(user_key(WINDOW_PREFIX, USER), f"{time.time() - 90_000:.3f}")
    assert sender.send(USER, FROM, "A message from before the STOP") == (None, "held")
    assert said in write(app, stop)  # answered (their own message), and told how to undo it
    report = user_report(users, USER)
    assert report["messages_off"]["via"] == "user" and report["held"] == []  # what waited is dropped
    assert "A message from before the STOP" not in [m.get("Body") for m in to_user(twilio)]  # STOP: never sent
    redis_client.set(user_key(WINDOW_PREFIX, USER), f"{time.time() - 90_000:.3f}")
    before = len(to_user(twilio))
    assert sender.send(USER, FROM, "Our new menu is out!") == (None, "messages_off")  # nothing held, no template
    assert not sender.send_reply(USER, FROM, "A reminder").held and len(to_user(twilio)) == before
    assert user_report(users, USER)["held"] == []
    assert "<Message>" in write(app, "what time do you open?")  # their own messages are still answered
    write(app, start)
    assert user_report(users, USER)["messages_off"] is None
    redis_client.set(user_key(WINDOW_PREFIX, USER), f"{time.time() - 90_000:.3f}")
    assert sender.send(USER, FROM, "Welcome back") == (None, "held")


def test_the_operator_can_record_a_users_stop_from_the_cli(app, redis_url, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from bot.ops.commands import main

    write(app, "hello")
    monkeypatch.setenv("REDIS_URL", redis_url)
    assert main(["optout", USER]) == 0
    assert user_report(app.extensions["bot.services"].users, USER)["messages_off"]["via"] == "cli"
    assert main(["optin", USER]) == 0
    assert user_report(app.extensions["bot.services"].users, USER)["messages_off"] is None
