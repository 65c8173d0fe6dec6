"""The stand-in model's scripted steps and HTTP plumbing (bot/dev/standin.py serves them)."""

from __future__ import annotations

import select
import socket
import sys
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from bot.dev.standin_images import text_parts


@dataclass
class Step:
    """One scripted answer; `match` limits it to requests whose last user message contains it."""

    content: str | None = None
    status: int = 200
    delay_s: float = 0.0
    finish_reason: str = "stop"
    match: str | None = None
    retry_after: int | None = None  # sent as Retry-After with an error status
    stall_s: float = 0.0  # send the headers and half the body, then stall this long
    kind: str = "chat"  # or "transcription": a step answers only requests of its kind
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()  # (tool, arguments): the answer calls them

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> "Step":
        """Build from a JSON object."""
        return cls(
            content=obj.get("content"),
            status=int(obj.get("status", 200)),
            delay_s=float(obj.get("delay_s", 0.0)),
            finish_reason=str(obj.get("finish_reason", "stop")),
            match=obj.get("match"),
            retry_after=obj.get("retry_after"),
            stall_s=float(obj.get("stall_s", 0.0)),
            kind=str(obj.get("kind", "chat")),
            tool_calls=tuple((str(c["name"]), dict(c.get("arguments") or {})) for c in obj.get("tool_calls") or ()),
        )



class _Server(ThreadingHTTPServer):
    """A threading HTTP server that stays quiet when a client gave up (a timeout test)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that hung up before their answer; report anything else."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def client_gone(connection: socket.socket) -> bool:
    """Return whether the client closed its side of the connection (it timed out and left)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def wants_json(body: dict[str, Any]) -> bool:
    """Return whether a chat request asks for Structured Outputs or JSON mode."""
    response_format = body.get("response_format")
    return isinstance(response_format, dict) and response_format.get("type") in ("json_schema", "json_object")


def last_user_text(messages: list[dict[str, Any]]) -> str:
    """Return the text of the last user message (a photo's caption, say)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return "\n".join(text_parts(message.get("content")))  # a photo's caption, say
    return ""


def invalid_request(message: str, **extra: Any) -> dict[str, Any]:
    """Return an OpenAI-shaped invalid_request_error body."""
    return {"error": {"message": message, "type": "invalid_request_error", **extra}}
