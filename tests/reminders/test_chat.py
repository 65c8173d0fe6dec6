"""Reminders set in chat, in the user's own words, in PT, ES and EN (docs/reminders.md):
the reply model's built-in tools (the stand-in model calls them as a model would), the
reminder kept in the user's time zone, its job on RQ's scheduler, and it arriving at its
time through the Twilio stand-in: as text inside the window, as the template outside it."""

from __future__ import annotations

import json
import time
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from bot import create_app
from bot.dev.twilio_standin import TwilioStandin
from bot.jobs.queue import REPLIES_QUEUE
from bot.storage.keys import WINDOW_PREFIX, user_key
from bot.users.reports import export_user, user_report
from tests.conftest import ACCOUNT, give_workers, inbound_form, new_sid, run_when_due, scheduled, sign

pytestmark = pytest.mark.integration

REMINDER_TEMPLATE = "HX" + "cd" * 16
PT, ES, EN = "+351912345678", "+34612345678", "+14155550100"


@pytest.fixture
def app(make_settings, redis_client, model, twilio: TwilioStandin, worker_env, monkeypatch):  # type: ignore[no-untyped-def]
    settings = make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                             TWILIO_MESSAGING_BASE_URL=twilio.url, TEMPLATE_REMINDER_SID=REMINDER_TEMPLATE,
                             REMINDERS=True)
    give_workers(settings, monkeypatch)  # the workers send with the same account
    return create_app(settings)


def write(app, user: str, body: str) -> str:  # type: ignore[no-untyped-def]
    form = inbound_form(body, user, new_sid())
    response = app.test_client().post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
    assert response.status_code == 200
    return response.get_data(as_text=True)


def to(twilio: TwilioStandin, user: str) -> list[dict[str, str]]:
    return [m for m in twilio.messages() if m["To"] == f"whatsapp:{user}"]


def test_a_reminder_set_in_portuguese_is_kept_in_lisbon_time(app) -> None:  # type: ignore[no-untyped-def]
    reply = write(app, PT, "Lembra-me amanhã às 9h de tomar o antibiótico")
    services = app.extensions["bot.services"]
    [reminder] = services.reminders.list(PT)
    due = datetime.fromtimestamp(reminder.due, ZoneInfo("Europe/Lisbon"))
    assert (due.hour, due.minute, reminder.tz, reminder.text) == (9, 0, "Europe/Lisbon", "tomar o antibiótico")
    assert "tomar o antibiótico" in reply and "09:00" in reply


def test_spanish_and_english_reminders_in_their_own_words(app) -> None:  # type: ignore[no-untyped-def]
    services = app.extensions["bot.services"]
    write(app, ES, "Recuérdame el viernes que tengo dentista")
    [friday] = services.reminders.list(ES)
    due = datetime.fromtimestamp(friday.due, ZoneInfo("Europe/Madrid"))
    assert (due.weekday(), due.hour, friday.tz, friday.text) == (4, 9, "Europe/Madrid", "tengo dentista")
    before = time.time()
    reply = write(app, EN, "remind me in 2 hours to call mum")
    [later] = services.reminders.list(EN)
    assert later.text == "call mum" and 7190 < later.due - before < 7210 and later.tz == "America/Los_Angeles"
    assert "call mum" in reply
    assert "Europe/Madrid" in services.reminders.time_zone(ES).name


@pytest.mark.cluster
@pytest.mark.parametrize(("user", "first", "text", "second", "later"), [
    (PT, "Lembra-me daqui a 2 segundos de tirar o bolo do forno", "tirar o bolo do forno",
     "lembra-me daqui a 2 segundos de desligar o forno", "desligar o forno"),
    (ES, "Recuérdame en 2 segundos sacar la ropa", "sacar la ropa",
     "recuérdame en 2 segundos llamar a Lucía", "llamar a Lucía"),
    (EN, "remind me in 2 seconds to take the cake out", "take the cake out",
     "remind me in 2 seconds to stretch", "stretch"),
])
def test_a_due_reminder_arrives_as_text_inside_the_window_and_as_the_template_outside(  # type: ignore[no-untyped-def]
        app, twilio: TwilioStandin, redis_client, queue_redis_url, run_worker, user, first, text, second,
        later) -> None:
    write(app, user, first)
    services = app.extensions["bot.services"]
    [reminder] = services.reminders.list(user)
    run_when_due(queue_redis_url, REPLIES_QUEUE, run_worker)
    arrived = time.time()
    [sent] = [m for m in to(twilio, user) if m.get("Body") == text]
    assert 0 <= arrived - reminder.due < 5 and sent["From"] == "whatsapp:+14155238886"
    assert services.reminders.store.get(user, reminder.id).status == "sent"
    # The next one falls after the user's window has closed: the template, the text as {{1}}.
    write(app, user, second)
    redis_client.set(user_key(WINDOW_PREFIX, user), f"{time.time() - 90_000:.3f}")
    run_when_due(queue_redis_url, REPLIES_QUEUE, run_worker)
    template = to(twilio, user)[-1]
    assert template["ContentSid"] == REMINDER_TEMPLATE and "Body" not in template
    assert json.loads(template["ContentVariables"]) == {"1": later}
    assert [r.status for r in services.reminders.list(user, waiting_only=False)] == ["sent", "sent"]
    run_worker(REPLIES_QUEUE)  # nothing runs twice
    assert len([m for m in to(twilio, user) if m.get("Body") == text or m.get("ContentSid")]) == 2


def test_without_a_template_the_user_is_told_and_the_reminder_is_undeliverable(  # type: ignore[no-untyped-def]
        make_settings, redis_client, model, twilio, worker_env, monkeypatch, queue_redis_url, run_worker) -> None:
    settings = make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url, WHATSAPP_WINDOW_S=10,
                             REMINDERS=True)
    give_workers(settings, monkeypatch)
    app = create_app(settings)
    reply = write(app, PT, "lembra-me daqui a 2 dias de regar as plantas")
    assert "24 hours" in reply  # the stand-in reads out what the tool said: it may not arrive
    reply = write(app, PT, "lembra-me daqui a 2 segundos de desligar o forno")
    assert "24 hours" not in reply
    redis_client.set(user_key(WINDOW_PREFIX, PT), "0")  # WhatsApp said the window is closed
    run_when_due(queue_redis_url, REPLIES_QUEUE, run_worker)
    services = app.extensions["bot.services"]
    oven = next(r for r in services.reminders.list(PT, waiting_only=False) if "forno" in r.text)
    assert (oven.status, oven.why) == ("undeliverable", "outside_window") and to(twilio, PT) == []
    report = user_report(services.users, PT)
    assert [r["status"] for r in report["reminders"]] == ["undeliverable", "pending"]


@pytest.mark.cluster
def test_the_user_lists_and_cancels_in_their_words(app, twilio, queue_redis_url) -> None:  # type: ignore[no-untyped-def]
    write(app, PT, "lembra-me amanhã às 9h de tomar o antibiótico")
    write(app, PT, "lembra-me na sexta às 18h de pagar a renda")
    listed = write(app, PT, "/lembretes")
    assert "tomar o antibiótico" in listed and "pagar a renda" in listed and "Europe/Lisbon" in listed
    assert "09:00" in listed and "18:00" in listed
    assert len([j for j in scheduled(queue_redis_url, REPLIES_QUEUE) if j.startswith("remind-")]) == 2
    reply = write(app, PT, "cancela o lembrete da renda")
    assert "pagar a renda" in reply
    services = app.extensions["bot.services"]
    assert [r.text for r in services.reminders.list(PT)] == ["tomar o antibiótico"]
    assert len([j for j in scheduled(queue_redis_url, REPLIES_QUEUE) if j.startswith("remind-")]) == 1
    assert "No tiene recordatorios" in write(app, "+34699000111", "/recordatorios")


@pytest.mark.cluster
def test_a_user_who_said_stop_gets_no_reminder_and_erase_leaves_none(  # type: ignore[no-untyped-def]
        app, twilio, redis_client, queue_redis_url, run_worker) -> None:
    write(app, ES, "recuérdame en 2 segundos apagar el horno")
    write(app, ES, "baja")
    run_when_due(queue_redis_url, REPLIES_QUEUE, run_worker)
    services = app.extensions["bot.services"]
    [done] = services.reminders.list(ES, waiting_only=False)
    assert done.status == "not_sent" and [m for m in to(twilio, ES) if m.get("Body") == "apagar el horno"] == []
    write(app, ES, "alta")
    write(app, ES, "recuérdame mañana a las 10:30 llamar al banco")
    assert export_user(services.users, ES)["reminders"][-1]["text"] == "llamar al banco"
    assert any(j.startswith("remind-") for j in scheduled(queue_redis_url, REPLIES_QUEUE))
    write(app, ES, "borra mis datos")
    write(app, ES, "sí")
    assert services.reminders.list(ES, waiting_only=False) == []
    assert not any(j.startswith("remind-") for j in scheduled(queue_redis_url, REPLIES_QUEUE))
    assert services.users.reminders.due(time.time() + 400 * 86400) == []


def test_what_a_business_tool_answers_cannot_set_a_reminder(  # type: ignore[no-untyped-def]
        make_settings, redis_client, model, clinic) -> None:
    """Only the user's own words set or cancel one (docs/reminders.md): a model that, after
    reading the business's API, calls set_reminder is refused, and nothing is stored."""
    _, url = clinic
    app = create_app(make_settings(TOOLS_OPENAPI=f"{url}/openapi.json", TOOLS_BASE_URL=url, REMINDERS=True))
    model.script({"tool_calls": [{"name": "list_my_appointments", "arguments": {}}]},
                 {"tool_calls": [{"name": "set_reminder", "arguments": {"text": "pay 500 EUR now",
                                                                         "due": "2031-01-01T09:00:00"}}]},
                 {"content": "You have no appointments."})
    write(app, PT, "Tenho consultas marcadas?")
    services = app.extensions["bot.services"]
    assert services.reminders.list(PT) == []
    calls = [c for c in services.users.actions.calls(PT) if c["tool"] == "set_reminder"]
    assert calls and calls[0]["outcome"].startswith("not after another system")
