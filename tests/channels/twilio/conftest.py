"""Fixtures of the Twilio channel's tests: the app with deferred replies on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from xml.etree import ElementTree

import pytest

from bot import create_app
from bot.dev.twilio_standin import TwilioStandin
from tests.conftest import ACCOUNT, give_workers, sign


@pytest.fixture
def deferred_with(make_settings, redis_client, model, twilio: TwilioStandin, monkeypatch, run_worker):  # type: ignore[no-untyped-def]
    """deferred_with(**settings) -> post(form) -> (TwiML messages, seconds): the app with
    deferred replies on, its workers given the same settings (after run_worker has given
    them the defaults)."""

    def build(**overrides):  # type: ignore[no-untyped-def]
        settings = make_settings(TWILIO_ACCOUNT_SID=ACCOUNT, TWILIO_API_BASE_URL=twilio.url,
                                 TWILIO_MESSAGING_BASE_URL=twilio.url, DEFERRED_REPLIES=True, **overrides)
        give_workers(settings, monkeypatch)
        client = create_app(settings).test_client()

        def post(form: dict[str, str]) -> tuple[list[str], float]:
            started = time.monotonic()
            response = client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})
            elapsed = time.monotonic() - started
            assert response.status_code == 200, response.data
            return [m.text or "" for m in ElementTree.fromstring(response.data).iter("Message")], elapsed

        return post

    return build


@contextmanager
def worker_pool(queue_redis_url: str) -> Iterator[Callable[[], None]]:
    """Run two supervised RQ workers on `replies`, with the Procfile's intervals; yield
    kill_busy(), which SIGKILLs the worker answering a job, with its work horse."""
    import psutil
    import redis
    from rq.worker import Worker

    from bot.dev.processes import stop_process

    rq = str(Path(sys.executable).parent / "rq")
    command = [sys.executable, "-m", "workers.supervise", "--processes", "2", rq, "worker", "--worker-class",
               "workers.worker.BotWorker", "--url", queue_redis_url, "--job-monitoring-interval", "5",
               "--maintenance-interval", "10", "--logging_level", "WARNING", "replies"]
    supervisor = subprocess.Popen(command, env=dict(os.environ), stderr=subprocess.DEVNULL)
    connection = redis.Redis.from_url(queue_redis_url)

    def kill_busy() -> None:
        busy = next(w for w in Worker.all(connection=connection) if w.get_current_job_id())
        for proc in [psutil.Process(busy.pid), *psutil.Process(busy.pid).children(recursive=True)]:
            proc.kill()

    try:
        yield kill_busy
    finally:
        stop_process(supervisor, timeout_s=15)
        connection.close()
