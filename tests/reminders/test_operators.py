"""Operators manage a user's reminders (docs/reminders.md): `whatsapp-bot reminders
list|add|cancel`, the admin API and the console, through the same operations, with a clear
refusal for a bad time, and each change audit-logged."""

from __future__ import annotations

import os
import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from structlog.testing import capture_logs

from bot import create_app
from bot.jobs.queue import REPLIES_QUEUE
from tests.cli_support import run_cli
from tests.conftest import AUTH_TOKEN, redis_env, scheduled
from tests.ops.console.support import SECRET, TOKEN, post, sign_in
from bot.users.reminders import add_reminder
from tests.reminders.test_chat import PT, write

pytestmark = pytest.mark.integration

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def lisbon(days: int = 1, hour: int = 9) -> str:
    """Return a local time in Lisbon, days ahead, as an operator types it."""
    moment = datetime.now(ZoneInfo("Europe/Lisbon")) + timedelta(days=days)
    return moment.replace(hour=hour, minute=0, second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M")


def made_due(made: dict) -> float:  # type: ignore[type-arg]
    """Return a reminder's due time from its public form."""
    return datetime.fromisoformat(made["due"]).timestamp()


@pytest.fixture
def app(make_settings, redis_client, model):  # type: ignore[no-untyped-def]
    return create_app(make_settings(ADMIN_TOKEN=TOKEN, CONSOLE_SECRET=SECRET, REMINDERS=True))


@pytest.mark.cluster
def test_the_cli_lists_adds_and_cancels(app, redis_url, queue_redis_url, standin_server, tmp_path) -> None:  # type: ignore[no-untyped-def]
    write(app, PT, "Olá")
    env = {"PATH": os.environ["PATH"], "TWILIO_AUTH_TOKEN": AUTH_TOKEN, "OPENAI_API_KEY": "test-key",
           "OPENAI_BASE_URL": standin_server.url, "REMINDERS": "true", **redis_env(redis_url, queue_redis_url)}
    added = run_cli(["reminders", "add", PT, lisbon(2, 10), "Consulta às 10h na clínica"], env, tmp_path)
    assert added.returncode == 0, added.stderr
    rid = added.stdout.split(":")[0]
    assert "10:00" in added.stdout and "Europe/Lisbon" in added.stdout
    listed = run_cli(["reminders", "list", PT], env, tmp_path)
    assert rid in listed.stdout and "pending" in listed.stdout and "Consulta às 10h" in listed.stdout
    assert any(j.endswith(rid) for j in scheduled(queue_redis_url, REPLIES_QUEUE))
    refused = run_cli(["reminders", "add", PT, "yesterday", "x"], env, tmp_path)
    assert refused.returncode == 2 and "ISO 8601" in refused.stderr
    past = run_cli(["reminders", "add", PT, "2020-01-01T09:00", "x"], env, tmp_path)
    assert past.returncode == 2 and "passed" in past.stderr
    cancelled = run_cli(["reminders", "cancel", PT, rid], env, tmp_path)
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout
    assert not any(j.endswith(rid) for j in scheduled(queue_redis_url, REPLIES_QUEUE))
    again = run_cli(["reminders", "cancel", PT, rid], env, tmp_path)
    assert again.returncode == 2 and "no such reminder" in again.stderr


def test_the_admin_api_sets_lists_and_cancels(app) -> None:  # type: ignore[no-untyped-def]
    client = app.test_client()
    write(app, PT, "Olá")
    made = client.post(f"/admin/users/{PT}/reminders", json={"text": "Trazer as análises", "due": lisbon(2, 8)},
                       headers=AUTH)
    assert made.status_code == 201 and made.json["time_zone"] == "Europe/Lisbon" and made.json["status"] == "pending"
    assert made.json["notes"] and "TEMPLATE_REMINDER_SID" in made.json["notes"][0]  # tomorrow is past the window
    listed = client.get(f"/admin/users/{PT}/reminders", headers=AUTH).json["reminders"]
    assert [(r["text"], r["set_by"]) for r in listed] == [("Trazer as análises", "operator:admin_api")]
    bad = client.post(f"/admin/users/{PT}/reminders", json={"text": "x", "due": "2099-01-01T09:00"}, headers=AUTH)
    assert bad.status_code == 400 and bad.json["reason"] == "too_far"
    assert client.post(f"/admin/users/{PT}/reminders", json={"text": "x"}, headers={}).status_code == 401
    gone = client.delete(f"/admin/users/{PT}/reminders/{made.json['id']}", headers=AUTH)
    assert gone.status_code == 200 and gone.json["status"] == "cancelled"
    assert client.delete(f"/admin/users/{PT}/reminders/{made.json['id']}", headers=AUTH).status_code == 404


def test_the_console_sets_and_cancels_with_the_reason_when_refused(app) -> None:  # type: ignore[no-untyped-def]
    write(app, PT, "Olá")
    console = app.test_client()
    assert sign_in(console).status_code == 302
    page = f"/console/users/{PT}"
    with capture_logs() as logs:
        response = post(console, f"{page}/reminders", {"text": "Levar o cartão de cidadão", "due": lisbon(3, 11)},
                        page=page)
    assert response.status_code == 302
    html = console.get(page).get_data(as_text=True)
    assert "Levar o cartão de cidadão" in html and "set by operator" in html and "Reminder set for" in html
    assert [e["actor"] for e in logs if e["event"] == "audit.reminder_set"] == ["console:admin"]
    rid = app.extensions["bot.services"].reminders.list(PT)[0].id
    post(console, f"{page}/reminders", {"text": "x", "due": "não é uma data"}, page=page)
    assert "Reminder not set" in console.get(page).get_data(as_text=True)
    assert console.post(f"{page}/reminders/{rid}/cancel").status_code == 400  # no CSRF token: refused
    assert post(console, f"{page}/reminders/{rid}/cancel", page=page).status_code == 302
    assert app.extensions["bot.services"].reminders.list(PT) == []
    assert "cancelled" in console.get(page).get_data(as_text=True)
    # One that was sent shows when (and one that could not be, why).
    store = app.extensions["bot.services"].users.reminders
    for text, outcome in (("Tomar o antibiótico", "sent"), ("Regar as plantas", "undeliverable")):
        made = add_reminder(app.extensions["bot.services"].users, app.extensions["bot.services"].reminders, PT, text,
                            lisbon(1, 9), actor="test", via="test")
        store.take(PT, made["id"], now=made_due(made))
        store.settle(PT, made["id"], outcome, sid="SM1" if outcome == "sent" else "", why="" if outcome == "sent"
                     else "outside_window")
    html = console.get(page).get_data(as_text=True)
    assert re.search(r'badge-ok">sent \d+ s ago', html), "the sent reminder's badge says when"
    assert "not delivered: outside the window, no template" in html
