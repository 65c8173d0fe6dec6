"""Deferred replies (docs/deferred.md): a voice note is acknowledged at once and answered by a
worker through the Messages API, with a typing indicator for its MessageSid; replies keep
the messages' order; a redelivery, a worker redone after a crash or an erase never makes a
second reply or resurrects data. Real Redis, the real twilio client against the local
Twilio stand-in, real speech recognition by the stand-in model."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bot import create_app
from bot.conversation.messages import SPOKEN_MARK
from bot.dev.standin import StandinModel
from bot.dev.twilio_standin import TwilioStandin
from bot.observability.metrics import DEFERRED, TYPING_INDICATORS
from bot.storage.keys import user_keys
from bot.users.lifecycle import erase_user
from tests.channels.twilio.conftest import worker_pool
from tests.conftest import ACCOUNT, AUTH_TOKEN, USER, give_workers, inbound_form, sign

pytestmark = pytest.mark.integration

VOICE = (Path(__file__).resolve().parents[2] / "data" / "voice_ana.ogg").read_bytes()
OGG = "audio/ogg; codecs=opus"


def media_sid() -> str:
    import uuid

    return "MM" + uuid.uuid4().hex


@pytest.fixture
def deferred(deferred_with):  # type: ignore[no-untyped-def]
    """post(form) -> (TwiML messages, seconds), with the default settings."""
    return deferred_with()


def voice_form(twilio: TwilioStandin, sid: str | None = None) -> dict[str, str]:
    sid = sid or media_sid()
    return inbound_form("", sid=sid, NumMedia="1", MediaContentType0=OGG, MediaUrl0=twilio.add_media(sid, VOICE, OGG))


@contextmanager
def mid_transcription(model: StandinModel, action: Callable[[], object]) -> Iterator[None]:
    """Run `action` on another thread while the voice note's transcription is held (the
    model answers nothing until the action is done), as the block runs the worker."""
    def act() -> None:
        try:
            deadline = time.monotonic() + 60  # a ceiling only a hang reaches
            while not model.transcriptions() and time.monotonic() < deadline:
                time.sleep(0.02)
            action()
        finally:
            model.gate.set()

    model.gate.clear()
    thread = threading.Thread(target=act)
    thread.start()
    try:
        yield
    finally:
        thread.join(60)
        model.gate.set()


def sent_to_user(twilio: TwilioStandin) -> list[str]:
    return [m["Body"] for m in twilio.messages() if m["To"] == f"whatsapp:{USER}"]


@pytest.mark.cluster
def test_a_slow_voice_note_is_acknowledged_at_once_and_answered_once(  # type: ignore[no-untyped-def]
        deferred_with, twilio, model: StandinModel, services, run_worker) -> None:
    deferred = deferred_with(WEBHOOK_DEADLINE_S=3.0)  # Twilio's clock, made short: 3 s
    model.script({"kind": "transcription", "content": "What time do you open on Saturdays in Porto?", "delay_s": 4})
    form = voice_form(twilio)
    answered = DEFERRED.labels(kind="voice", outcome="answered")._value.get()
    messages, _ = deferred(form)
    assert messages == [] and model.transcriptions() == []  # empty TwiML before any transcription began
    assert deferred(form)[0] == []  # Twilio redelivers while the work waits: nothing new starts
    assert [q.sid for q in services.deferred.queued(USER)] == [form["MessageSid"]]
    run_worker()  # the transcription takes 4 s: past the webhook's deadline, not the worker's
    [reply] = sent_to_user(twilio)
    assert reply.startswith(f"{SPOKEN_MARK}“What time do you open on Saturdays") and "canned reply" in reply
    assert [i["messageId"] for i in twilio.typing()] == [form["MessageSid"]]  # one: it is refreshed after 20 s
    assert twilio.typing()[0]["channel"] == "whatsapp"
    [pair] = services.store.load(USER).recent
    assert pair.user == f"{SPOKEN_MARK}What time do you open on Saturdays in Porto?"  # stored as on the webhook
    assert DEFERRED.labels(kind="voice", outcome="answered")._value.get() == answered + 1
    deferred(form)  # a late redelivery: claimed and answered already
    run_worker()
    assert len(sent_to_user(twilio)) == 1 and services.deferred.queued(USER) == []
    assert not services.deferred.waiting(USER)


@pytest.mark.cluster
def test_a_text_sent_after_a_slow_voice_note_is_answered_after_it(  # type: ignore[no-untyped-def]
        deferred, twilio, model: StandinModel, services, run_worker) -> None:
    model.script({"kind": "transcription", "content": "Do you deliver to Matosinhos?"},
                 {"content": "Yes, we deliver to Matosinhos every weekday morning.", "match": "Matosinhos"},
                 {"content": "We open at 8 on Saturdays.", "match": "Saturday"})
    deferred(voice_form(twilio))
    messages, _ = deferred(inbound_form("And what time do you open on Saturday?"))
    assert messages == []  # behind the voice note, not overtaking it
    run_worker()
    replies = sent_to_user(twilio)
    assert len(replies) == 2 and "Matosinhos" in replies[0] and "Saturdays" in replies[1]
    assert [p.user for p in services.store.load(USER).recent] == [
        f"{SPOKEN_MARK}Do you deliver to Matosinhos?", "And what time do you open on Saturday?"]
    # nothing left queued: the next text is answered on the webhook again
    assert deferred(inbound_form("Thanks, see you on Saturday then!"))[0] != []


@pytest.mark.cluster
def test_an_erase_while_the_voice_note_is_transcribed_leaves_nothing_and_sends_nothing(  # type: ignore[no-untyped-def]
        deferred, twilio, model: StandinModel, services, run_worker, redis_client) -> None:
    model.script({"kind": "transcription", "content": "Remember that I am vegetarian."})
    deferred(voice_form(twilio))
    with mid_transcription(model, lambda: erase_user(services.users, USER, actor="test", via="cli")):
        run_worker()  # RQ's worker wants the main thread
    assert model.transcriptions() and sent_to_user(twilio) == []
    assert [k for k in user_keys(USER) if redis_client.exists(k)] == []  # nothing written back


def test_a_failed_typing_indicator_never_blocks_the_reply(  # type: ignore[no-untyped-def]
        deferred, twilio, model: StandinModel, run_worker) -> None:
    twilio.typing_status = 500
    failed = TYPING_INDICATORS.labels(outcome="failed")._value.get()
    deferred(voice_form(twilio))
    run_worker()
    assert len(sent_to_user(twilio)) == 1
    assert TYPING_INDICATORS.labels(outcome="failed")._value.get() == failed + 1


def test_without_the_messages_api_voice_notes_stay_on_the_webhook(  # type: ignore[no-untyped-def]
        make_settings, redis_client, model, twilio) -> None:
    settings = make_settings(DEFERRED_REPLIES=True)  # no TWILIO_ACCOUNT_SID: nothing can be sent by API
    assert not settings.deferred_on
    app = create_app(settings)
    assert "bot.deferral" not in app.extensions


def test_a_worker_killed_mid_voice_note_still_answers_it_once(  # type: ignore[no-untyped-def]
        deferred, twilio, model: StandinModel, services, queue_redis_url) -> None:
    """Two supervised workers with the Procfile's intervals; the one transcribing is killed
    with its work horse (SIGKILL); the pool takes the job over and the user gets one reply."""
    model.script({"kind": "transcription", "content": "Do you have gluten-free cakes?"})
    form = voice_form(twilio)
    deferred(form)
    model.gate.clear()  # the first transcription is held until its worker is dead
    try:
        with worker_pool(queue_redis_url) as kill_busy:
            deadline = time.monotonic() + 30
            while not model.transcriptions() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert model.transcriptions(), "the job never reached the transcription"
            kill_busy()
            killed = time.monotonic()
            model.gate.set()
            while not sent_to_user(twilio) and time.monotonic() < killed + 45:
                time.sleep(0.1)
            answered_after = time.monotonic() - killed
            time.sleep(1.0)  # a second reply would come now
    finally:
        model.gate.set()
    assert len(sent_to_user(twilio)) == 1 and answered_after < 30
    assert len(services.store.load(USER).recent) == 1  # the pair committed once
    assert len(twilio.typing()) >= 2 and {i["messageId"] for i in twilio.typing()} == {form["MessageSid"]}
    assert services.deferred.queued(USER) == [] and not services.deferred.waiting(USER)


@pytest.mark.cluster
def test_inspect_and_the_console_show_a_deferred_message_in_progress(  # type: ignore[no-untyped-def]
        deferred, twilio, services) -> None:
    from bot.users.reports import export_user, user_report

    form = voice_form(twilio)
    deferred(form)
    [row] = user_report(services.users, USER)["deferred"]
    assert row["sid"] == form["MessageSid"] and row["kind"] == "voice" and not row["sending"] and "body" not in row
    assert export_user(services.users, USER)["deferred"][0]["body"] == ""


def test_in_rest_mode_a_voice_note_is_deferred_too(  # type: ignore[no-untyped-def]
        make_settings, redis_client, model, twilio: TwilioStandin, monkeypatch, run_worker, services) -> None:
    settings = make_settings(REPLY_MODE="rest", TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                             TWILIO_MESSAGING_BASE_URL=twilio.url, DEFERRED_REPLIES=True)
    give_workers(settings, monkeypatch)
    app = create_app(settings)
    form = voice_form(twilio)
    response = app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert response.status_code == 200 and response.headers["X-Bot-Reply"] == "deferred"
    app.extensions["bot.replier"].close()  # nothing of it was made on the web's threads
    assert sent_to_user(twilio) == [] and [q.sid for q in services.deferred.queued(USER)] == [form["MessageSid"]]
    run_worker()
    [reply] = sent_to_user(twilio)
    assert reply.startswith(SPOKEN_MARK)


def test_the_typing_indicator_is_refreshed_while_the_work_runs_and_no_longer(twilio: TwilioStandin) -> None:
    from bot.channels.twilio.typing import TypingIndicator
    from twilio.rest import Client

    client = Client(ACCOUNT, AUTH_TOKEN)
    client.messaging.base_url = twilio.url
    indicator = TypingIndicator(client, max_s=1.0, refresh_s=0.1)
    with indicator.shown("MM" + "2" * 32):
        time.sleep(2.0)  # the work outlasts TYPING_MAX_S
    sent = twilio.typing()
    assert 2 <= len(sent) <= 11  # at 0, 0.1 … 0.9 s (fewer on a busy machine): none after the most
    with indicator.shown("MM" + "3" * 32):
        pass  # the work ends at once: one indicator, and the keeper stops
    time.sleep(0.3)
    assert len(twilio.typing()) == len(sent) + 1


@pytest.mark.cluster
def test_a_reset_while_the_voice_note_is_transcribed_stores_no_pair(  # type: ignore[no-untyped-def]
        deferred, twilio, model: StandinModel, services, run_worker) -> None:
    from bot.users.lifecycle import reset_conversation

    deferred(inbound_form("Hello, I'm planning a birthday party for my daughter in Porto."))
    model.script({"kind": "transcription", "content": "Can you make a unicorn cake for 20 people?"})
    deferred(voice_form(twilio))
    with mid_transcription(model, lambda: reset_conversation(services.users, USER, actor="test", via="cli")):
        run_worker()
    assert services.store.load(USER).recent == []  # the reset won: nothing from before it is stored
    assert len(sent_to_user(twilio)) == 1  # the user still hears back about what they asked
