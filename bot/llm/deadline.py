"""Hard deadlines for model calls.

httpx applies its timeout to each phase (connect, each read), so a server that trickles its
answer, or stalls midway, can hold a request far longer than the timeout. Two guards:

- `run_with_deadline` runs an attempt on a small per-process pool and stops waiting at the
  deadline: the caller (a webhook inside Twilio's 15 s) never waits longer;
- `DeadlineTransport` ends the abandoned request itself at its next body chunk past the same
  deadline, so it does not keep a thread and a connection for long.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Iterator, TypeVar

import openai


def _sdk_http_module() -> Any:
    """Return the HTTP library the openai SDK is built on: httpx, or its fork httpx2 in newer
    SDKs. Our transport must be a transport of that library."""
    client = next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
    return importlib.import_module(client.__module__.split(".")[0])


httpx = _sdk_http_module()
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


class _DeadlineStream(httpx.SyncByteStream):  # type: ignore[misc, name-defined]
    """A response body that refuses to go on past its deadline."""

    def __init__(self, stream: Any, deadline: float) -> None:
        self._stream = stream
        self._deadline = deadline

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise httpx.ReadTimeout("the response outlasted its deadline")
            yield chunk

    def close(self) -> None:
        self._stream.close()


class DeadlineTransport(httpx.HTTPTransport):  # type: ignore[misc, name-defined]
    """An HTTP transport whose responses stop at the request's read timeout, counted from the
    start of the request, not from the last byte."""

    def handle_request(self, request: Any) -> Any:
        timeout = (request.extensions.get("timeout") or {}).get("read") or 60.0
        deadline = time.monotonic() + float(timeout)
        response = super().handle_request(request)
        response.stream = _DeadlineStream(response.stream, deadline)
        return response
