"""The worker warms up before its first fork, so no job's work horse loads the SDK itself
(about 2 s of CPU per job: docs/semantic.md, Speed)."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import redis
from rq import Queue

from bot.llm.sdk import build_all, lazy_client
from bot.observability.metrics import flush_gc
from tests.workers.test_recovery import worker_env

pytestmark = pytest.mark.integration

RQ = str(Path(sys.executable).parent / "rq")


def test_build_all_builds_every_lazy_client_without_calling() -> None:
    client = lazy_client(api_key="k", base_url="http://127.0.0.1:9/v1", timeout=1.0)
    assert client._client is None
    assert build_all() >= 1
    assert client._client is not None  # built; port 9 was never called (it would refuse)


def test_a_jobs_work_horse_finds_the_sdk_loaded(settings, queue_redis_url: str) -> None:  # type: ignore[no-untyped-def]
    connection = redis.Redis.from_url(queue_redis_url)
    job = Queue("summaries", connection=connection).enqueue("tests.workers.warm_probe.loaded")
    subprocess.run([RQ, "worker", "--burst", "--worker-class", "workers.worker.BotWorker", "--url", queue_redis_url,
                    "--logging_level", "WARNING", "summaries"], env=worker_env(settings), check=True, timeout=120,
                   stderr=subprocess.DEVNULL)
    job.refresh()
    assert job.return_value() == {"openai": True, "frozen": True}
    connection.close()


def test_gunicorn_workers_build_the_apps_clients_before_their_first_request(settings, redis_client) -> None:  # type: ignore[no-untyped-def]
    from bot import create_app
    from bot.gunicorn_conf import post_worker_init

    app = create_app(settings)
    llm = app.extensions["bot.services"].llm.client
    assert llm._client is None  # lazy: the CLI and the tests never pay for it unless they call
    try:
        post_worker_init(worker=None)
        assert llm._client is not None
        assert gc.get_freeze_count() > 0  # what start-up loaded is never scanned by a full collection again
        before = _gc_pauses()
        gc.collect()
        flush_gc()
        assert _gc_pauses() > before  # and every collection's pause is timed
    finally:
        gc.unfreeze()


def test_a_collection_inside_the_metrics_own_lock_does_not_wait_on_it() -> None:
    """A collection can start anywhere, inside prometheus's lock too: timing it must not take
    that lock (it did, and a deferred reply's job waited forever)."""
    from bot.observability.metrics import GC_SECONDS, time_gc

    time_gc()
    value = GC_SECONDS.labels("2")._sum  # type: ignore[attr-defined]
    lock = getattr(value, "_lock", None)
    assert lock is not None
    done = threading.Event()

    def collect_while_locked() -> None:
        with lock:
            gc.collect()
        done.set()

    worker = threading.Thread(target=collect_while_locked, daemon=True)
    worker.start()
    assert done.wait(10), "the GC callback waited on the metric's lock"
    flush_gc()


def _gc_pauses() -> float:
    from bot.observability.metrics import GC_SECONDS

    return sum(sample.value for metric in GC_SECONDS.collect() for sample in metric.samples
               if sample.name.endswith("_count") and sample.labels.get("generation") == "2")


def test_the_procfiles_web_line_uses_the_gunicorn_settings() -> None:
    web = next(line for line in (Path(__file__).parents[2] / "Procfile").read_text().splitlines()
               if line.startswith("web:"))
    assert "-c python:bot.gunicorn_conf" in web
