"""`make run`'s ready line: checked, not guessed. The webhook's /readyz answers (Redis
reachable), the console's sign-in page answers (when it is on), the local embedding model
answers (when it is the one in use), and every RQ worker the Procfile starts has registered."""

from __future__ import annotations

import threading
import time
import urllib.request
from dataclasses import dataclass

import redis
from rq import Worker

from bot.jobs.status import stamp

#: How long the checks may take before the runner says what is still missing.
READY_WITHIN_S = 120.0


@dataclass(frozen=True)
class Expected:
    """What must answer before the bot is ready."""

    web: str  # http://127.0.0.1:PORT
    queue_url: str  # the Redis the RQ workers register in
    workers: int
    console: bool
    since: float  # when this run started: workers registered before it are a killed run's leftovers
    embed: str | None  # http://127.0.0.1:EMBEDDING_PORT, when the local model is in use


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return 200 <= response.status < 400
    except OSError:
        return False


def missing(expected: Expected) -> list[str]:
    """Return what does not answer yet."""
    out = []
    if not _answers(f"{expected.web}/readyz"):
        out.append("webhook")
    if expected.console and not _answers(f"{expected.web}/console/signin"):
        out.append("console")
    if expected.embed and not _answers(f"{expected.embed}/health"):
        out.append("embedding model")
    try:
        with redis.Redis.from_url(expected.queue_url, socket_timeout=2) as client:
            registered = sum(1 for worker in Worker.all(connection=client)
                             if (stamp(worker.birth_date) or 0) >= expected.since)
    except redis.RedisError:
        registered = 0
    if registered < expected.workers:
        out.append(f"workers ({registered} of {expected.workers})")
    return out


def wait_ready(expected: Expected, stopping: threading.Event) -> list[str]:
    """Wait until everything answers (return []) or READY_WITHIN_S passed (return what did
    not), or the run is stopping (return ["stopping"])."""
    deadline = time.monotonic() + READY_WITHIN_S
    while not stopping.is_set():
        left = missing(expected)
        if not left or time.monotonic() > deadline:
            return left
        stopping.wait(0.3)
    return ["stopping"]
