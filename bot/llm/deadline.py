"""Hard deadlines for model calls.

httpx applies its timeout to each phase (connect, each read), so a server that trickles its
answer, or stalls midway, can hold a request far longer than the timeout. Two guards:

- `run_with_deadline` runs an attempt on a small per-process pool and stops waiting at the
  deadline: the caller (a webhook inside Twilio's 15 s) never waits longer;
- the SDK clients' transport (bot/llm/transport.py) ends the abandoned request itself at its
  next body chunk past the same deadline, so it does not keep a thread and a connection for
  long.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable, TypeVar

T = TypeVar("T")

#: Attempts in flight at once in one process (web threads and abandoned attempts together).
POOL_SIZE = 128

_lock = threading.Lock()
_pool: tuple[int, ThreadPoolExecutor] | None = None


class DeadlineExceeded(Exception):
    """The attempt did not finish by its deadline."""


def _executor() -> ThreadPoolExecutor:
    """Return this process's pool; a forked child (an RQ job) builds its own."""
    global _pool
    with _lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="llm-attempt"))
        return _pool[1]


def submit(call: Callable[[], T]) -> Future[T]:
    """Start call() on this process's pool and return its future (the caller waits for it
    within its own deadline)."""
    return _executor().submit(call)


def run_with_deadline(call: Callable[[], T], timeout_s: float) -> T:
    """Return call()'s result, or raise DeadlineExceeded once timeout_s has passed."""
    future = submit(call)
    try:
        return future.result(timeout=max(0.0, timeout_s))
    except FutureTimeout:
        future.cancel()
        raise DeadlineExceeded(f"no answer within {timeout_s:.1f}s") from None
