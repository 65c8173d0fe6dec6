"""The HTTP transport of our openai SDK clients: a response stops at the request's read
timeout counted from the start of the request, not from the last byte (bot/llm/deadline.py).

It is a transport of the HTTP library the SDK is built on (httpx, or its fork httpx2 in newer
SDKs), so importing this module imports the SDK: only bot/llm/sdk.py does, when a client is
first used.
"""

from __future__ import annotations

import importlib
import socket
import time
from typing import Any, Iterator

import openai


def _sdk_http_module() -> Any:
    """Return the HTTP library the openai SDK is built on: httpx, or its fork httpx2 in newer
    SDKs. Our transport must be a transport of that library."""
    client = next(c for c in openai.DefaultHttpxClient.__mro__ if c.__name__ == "Client")
    return importlib.import_module(client.__module__.split(".")[0])


httpx = _sdk_http_module()


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


def deadline_transport(max_connections: int | None = None, max_keepalive: int | None = None,
                       nodelay: bool = False) -> DeadlineTransport:
    """Return a transport with these connection limits (httpx's defaults when None); with
    `nodelay`, TCP_NODELAY: the SDK writes headers and body apart, and Nagle with delayed ACKs
    adds 40 ms to each small request."""
    options: dict[str, Any] = {}
    if max_connections is not None:
        options["limits"] = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_keepalive)
    if nodelay:
        options["socket_options"] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
    return DeadlineTransport(**options)
