"""A work horse killed in the middle of a summary (the OOM killer's pick) loses nothing: its
worker redoes the job at once, without waiting out the backoff meant for model failures."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bot import create_app
from bot.dev.standin import StandinModel
from tests.conftest import USER, inbound_form, sign
from tests.conversation.test_summaries import SUMMARY, SUMMARY_MARK, chat, summary_requests

pytestmark = pytest.mark.integration


def test_killed_work_horse_is_redone_at_once_and_nothing_is_lost(  # type: ignore[no-untyped-def]
    make_settings, redis_client, model: StandinModel, services, queue_redis_url
) -> None:
    settings = make_settings(SUMMARY_RETRY_INTERVALS="300,300,300")  # a retry would wait 5 minutes
    client = create_app(settings).test_client()

    def send(body: str):  # type: ignore[no-untyped-def]
        form = inbound_form(body)
        return client.post("/whatsapp", data=form, headers={"X-Twilio-Signature": sign(form)})

    chat(send, model, 10)
    before = services.store.snapshot(USER)
    # The first attempt hangs in the model call, long enough to be killed there.
    model.script({"content": "never stored", "delay_s": 20, "match": SUMMARY_MARK},
                 {"content": SUMMARY, "match": SUMMARY_MARK})
    env = {**os.environ, **{k: str(v) for k, v in settings.model_dump().items() if v is not None}}
    rq = Path(sys.executable).parent / "rq"
    worker = subprocess.Popen(
        [str(rq), "worker", "--worker-class", "workers.worker.BotWorker", "--url", queue_redis_url, "--burst",
         "--logging_level", "WARNING", "summaries"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not summary_requests(model) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert summary_requests(model), "the job never reached the model"
        horses = psutil.Process(worker.pid).children()
        assert horses, "no work horse to kill"
        for horse in horses:
            os.kill(horse.pid, signal.SIGKILL)  # the job dies mid-call, before it stored anything
        after_kill = services.store.snapshot(USER)
        assert (after_kill.summary, after_kill.pending) == (before.summary, before.pending)
        worker.wait(timeout=60)  # the worker sees the dead horse, redoes the job, then the burst ends
    finally:
        if worker.poll() is None:
            worker.kill()
    context = services.store.load(USER)
    assert context.summary == SUMMARY and context.count_since_summary == 0
    assert services.store.pending_pairs(USER) == []
    assert len(summary_requests(model)) == 2
