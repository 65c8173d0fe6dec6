"""A burst from one user loses no pair (docs/conversation.md): twenty messages within two
seconds, a fifth of them redelivered, through the Procfile's web (gunicorn, two processes)
while a supervised worker pool runs beside it. Every pair is read by fact extraction, and
every pair is either folded into a summary or still pending: none is dropped at the cap."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.dev.processes import stop_process
from bot.dev.standin import StandinModel
from bot.storage.keys import MEMORY_PREFIX, user_key
from tests.conftest import USER, gunicorn_serving, inbound_form
from tests.conversation.test_concurrency import post
from tests.conversation.test_summaries import SUMMARY_MARK
from tests.memory.test_memory import EXTRACT_MARK

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

RQ = str(Path(sys.executable).parent / "rq")
SENT = 20
#: A long question, so that the burst's pairs pass what the pending pairs once held (4,000
#: bytes) many times over.
BODY = "Message {i:02d}: I am planning two weeks between Lisbon and Porto and would love museums, trams and food."


def numbers(texts: list[str]) -> set[int]:
    """Return the message numbers quoted in these model inputs."""
    return {int(n) for text in texts for n in re.findall(r"Message (\d\d):", text)}


def test_a_burst_of_twenty_with_redeliveries_loses_no_pair(  # type: ignore[no-untyped-def]
    make_settings, redis_client, model: StandinModel, services, queue_redis_url
) -> None:
    settings = make_settings(EXTRACTION_INTERVAL=1, EXTRACTION_IDLE_S=2, EXTRACTION_MAX_PAIRS=8, SUMMARY_IDLE_S=2,
                             SUMMARY_RETRY_INTERVALS="1,1,1")
    env = {**{k: str(v) for k, v in settings.model_dump().items() if v is not None}, "LOG_LEVEL": "WARNING"}
    workers = subprocess.Popen(
        [sys.executable, "-m", "workers.supervise", "--processes", "2", RQ, "worker", "--worker-class",
         "workers.worker.BotWorker", "--url", queue_redis_url, "--with-scheduler", "--maintenance-interval", "1",
         "--logging_level", "WARNING", "summaries", "facts"],
        env={**__import__("os").environ, **env}, stderr=subprocess.DEVNULL,
    )
    model.latency_s = 1.0  # a real model's second: replies in flight at once, background work slower than the burst
    forms = [inbound_form(BODY.format(i=i)) for i in range(SENT)]
    redelivered = [dict(forms[i]) for i in range(0, SENT, 5)]  # a fifth, sent again with its MessageSid
    try:
        with gunicorn_serving(settings) as url, ThreadPoolExecutor(max_workers=16) as pool:
            futures = []
            for form in [*forms[:10], *redelivered[:2], *forms[10:], *redelivered[2:]]:
                futures.append(pool.submit(post, url, form))
                time.sleep(2.0 / (SENT + len(redelivered)))  # the whole burst within two seconds
            assert all(len(f.result()) == 1 for f in futures)  # each got its reply (a redelivery, the same)
        memory = user_key(MEMORY_PREFIX, USER)
        deadline = time.monotonic() + 60  # a ceiling only a hang reaches
        while time.monotonic() < deadline and redis_client.hget(memory, "extracted_seq") != str(SENT):
            time.sleep(0.2)
    finally:
        stop_process(workers, timeout_s=15)
    context = services.store.load(USER)
    assert context.seq == SENT and redis_client.hget(memory, "extracted_seq") == str(SENT)
    extraction = [r["messages"][-1]["content"] for r in model.requests() if EXTRACT_MARK in r["messages"][-1]["content"]]
    assert numbers(extraction) == set(range(SENT))  # every message read by extraction
    summaries = [r["messages"][-1]["content"] for r in model.requests() if SUMMARY_MARK in r["messages"][-1]["content"]]
    pending = [p.user for p in services.store.pending_pairs(USER)]
    folded, waiting = numbers(summaries), numbers(pending)
    assert folded.isdisjoint(waiting) and folded | waiting == set(range(SENT))  # summarized + pending = sent
    assert context.summarized_seq + len(pending) == SENT
