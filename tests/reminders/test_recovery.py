"""Reminders survive what real deployments do to them (docs/reminders.md, Exactly once and
Surviving restarts): a worker killed while its reminder waits (it holds RQ's scheduler lock
for a minute after), a queue that lost the job, and two jobs for one reminder: each reminder
arrives once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot import create_app
from bot.dev.twilio_standin import TwilioStandin
from bot.jobs.queue import REPLIES_QUEUE
from bot.jobs.reminders import ReminderJobs
from tests.conftest import ACCOUNT, give_workers, scheduled
from tests.reminders.test_chat import EN, REMINDER_TEMPLATE, to, write

pytestmark = pytest.mark.integration


@pytest.fixture
def setup(make_settings, redis_client, model, twilio: TwilioStandin, worker_env, monkeypatch):  # type: ignore[no-untyped-def]
    settings = make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                             TWILIO_MESSAGING_BASE_URL=twilio.url, TEMPLATE_REMINDER_SID=REMINDER_TEMPLATE,
                             REMINDERS=True)
    give_workers(settings, monkeypatch)
    return settings, create_app(settings)


def start_worker(settings, queue_redis_url: str) -> subprocess.Popen:  # type: ignore[no-untyped-def]
    """The Procfile's worker (BotWorker with RQ's scheduler), maintenance every second."""
    env = {**os.environ, **{k: str(v) for k, v in settings.model_dump().items() if v is not None}}
    rq = Path(sys.executable).parent / "rq"
    return subprocess.Popen(
        [str(rq), "worker", "--worker-class", "workers.worker.BotWorker", "--url", queue_redis_url, "--with-scheduler",
         "--maintenance-interval", "1", "--job-monitoring-interval", "1", "--logging_level", "WARNING", REPLIES_QUEUE],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def arrived(twilio: TwilioStandin, body: str) -> list[dict[str, str]]:
    return [m for m in to(twilio, EN) if m.get("Body") == body]


def test_a_worker_killed_while_its_reminder_waits_loses_nothing_and_sends_once(  # type: ignore[no-untyped-def]
        setup, twilio: TwilioStandin, queue_redis_url) -> None:
    settings, app = setup
    write(app, EN, "remind me in 4 seconds to check the oven")
    [reminder] = app.extensions["bot.services"].reminders.list(EN)
    first = start_worker(settings, queue_redis_url)
    second = None
    try:
        time.sleep(1.5)  # it has taken RQ's scheduler lock (it outlives a killed worker by a minute)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
        assert arrived(twilio, "check the oven") == []
        second = start_worker(settings, queue_redis_url)
        deadline = time.monotonic() + 60
        while not arrived(twilio, "check the oven") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(arrived(twilio, "check the oven")) == 1
        assert time.time() - reminder.due < 30  # the sweep's bound, far under the lock's minute
        time.sleep(3)  # a second job, or the sweep again, would have sent it by now
        assert len(arrived(twilio, "check the oven")) == 1
        assert app.extensions["bot.services"].reminders.store.get(EN, reminder.id).status == "sent"
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


@pytest.mark.cluster
def test_a_reminder_whose_job_was_lost_is_queued_by_the_sweep_and_sent_once(  # type: ignore[no-untyped-def]
        setup, twilio: TwilioStandin, queue_redis_url, run_worker) -> None:
    import workers.jobs

    _settings, app = setup
    services = app.extensions["bot.services"]
    write(app, EN, "remind me in 1 minute to stretch")
    [reminder] = services.reminders.list(EN)
    jobs = ReminderJobs(services.jobs)
    assert jobs.status(EN, reminder.id) == "scheduled"
    services.jobs.delete(services.jobs.job_id("reminder", EN, reminder.id))  # a queue Redis that came back empty
    assert workers.jobs.sweep_reminders(now=reminder.due - 10) == 0  # not late yet: nothing to do
    assert workers.jobs.sweep_reminders(now=reminder.due + 6) == 1
    assert workers.jobs.sweep_reminders(now=reminder.due + 7) == 0  # queued already: not twice
    # Its time has come (the job checks the clock: moved to now, it runs now).
    services.users.reminders._change(EN, reminder.id, lambda r: setattr(r, "due", time.time()) or r)
    run_worker(REPLIES_QUEUE)
    assert len(arrived(twilio, "stretch")) == 1
    assert workers.jobs.sweep_reminders(now=time.time() + 60) == 0
    assert services.users.reminders.due(time.time() + 86400) == []
    assert not any(j.startswith("remind-") for j in scheduled(queue_redis_url, REPLIES_QUEUE))


@pytest.mark.cluster
def test_two_jobs_for_one_reminder_send_it_once(setup, twilio: TwilioStandin, run_worker) -> None:  # type: ignore[no-untyped-def]
    _settings, app = setup
    services = app.extensions["bot.services"]
    write(app, EN, "remind me in 1 second to drink water")
    [reminder] = services.reminders.list(EN)
    time.sleep(max(0.0, reminder.due - time.time()) + 0.1)
    jobs = ReminderJobs(services.jobs)
    jobs.schedule(EN, reminder.id, 0)  # queued now, beside the scheduled one
    services.jobs.queues[REPLIES_QUEUE].enqueue("workers.jobs.send_reminder", EN, reminder.id)  # and a stray copy
    run_worker(REPLIES_QUEUE)
    assert len(arrived(twilio, "drink water")) == 1


@pytest.mark.cluster
def test_a_job_that_died_after_twilio_took_the_reminder_does_not_send_it_again(  # type: ignore[no-untyped-def]
        setup, twilio: TwilioStandin, run_worker) -> None:
    _settings, app = setup
    services = app.extensions["bot.services"]
    store = services.users.reminders
    write(app, EN, "remind me in 1 second to feed the cat")
    [reminder] = services.reminders.list(EN)
    time.sleep(max(0.0, reminder.due - time.time()) + 0.1)
    # A job took it and Twilio took the message; then its worker died before it wrote "sent".
    assert store.take(EN, reminder.id) is not None
    app.extensions["bot.sender"].send_first(EN, reminder.from_, reminder.text, "reminder", None)
    store._change(EN, reminder.id, lambda r: setattr(r, "lease", time.time() - 1) or r)  # its lease ran out
    ReminderJobs(services.jobs).schedule(EN, reminder.id, 0)  # the redone job
    run_worker(REPLIES_QUEUE)
    assert len(arrived(twilio, "feed the cat")) == 1
    assert store.get(EN, reminder.id).status == "sent"
