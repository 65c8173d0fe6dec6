"""A small OpenAI-compatible Chat Completions and transcriptions server with canned, scriptable answers.

Tests, benchmarks and `make run` without an API key talk to it over real HTTP through the
real openai client. It is deterministic: with nothing scripted it answers from the last
user message, and a fact extraction request with the facts of the user's plain first-person
statements (bot/dev/standin_facts.py), and pass 2 with the named things in those facts
(bot/dev/standin_entities.py); a test can queue exact answers, errors and delays, and read
back what was asked. Never for production: it refuses to start with APP_ENV=production.
Offered tools are called for what the message asks (bot/dev/standin_tools.py), a photo
answered from its size and format (bot/dev/standin_images.py), a voice note
(POST /v1/audio/transcriptions) by real speech recognition (bot/dev/standin_audio.py), a
REFERENCE block by quoting it, and POST /v1/embeddings (bot/dev/standin_knowledge.py).

    python -m bot.dev.standin --port 8089 [--latency-ms 300] [--reply-chars 400]

Scripting over HTTP (the in-process `StandinModel` has the same as methods):
    POST /_standin/script   {"steps": [{"content": "...", "status": 200, "delay_s": 0,
                              "finish_reason": "stop", "match": "text in last user message",
                              "stall_s": 0 (send half the body, then stall),
                              "kind": "chat" (default) or "transcription",
                              "tool_calls": [{"name": "...", "arguments": {...}}]}]}
    GET  /_standin/requests  every chat request body received, oldest first
    GET  /_standin/transcriptions  every transcription request's fields (no audio), oldest first
    POST /_standin/reset     forget script and requests
A step answers only its kind; a transcription step's content is the transcript ("" for none;
the file must still decode), and its match is looked for in the file's name.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import threading
import time
from datetime import date
from http.server import BaseHTTPRequestHandler
from typing import Any, Callable

from bot.dev import standin_audio
from bot.dev.standin_http import Step, _Server, client_gone, invalid_request, last_user_text, wants_json
from bot.dev.standin_entities import ENTITY_SCHEMA_NAME, extract_request_entities
from bot.dev.standin_facts import extract_request_facts
from bot.dev.standin_given import given, summary_reply
from bot.dev.standin_images import InvalidImage, SeenImage, message_images, text_parts
from bot.dev.standin_tasks import TASK_SCHEMA_NAME, extract_request_task
from bot.dev.standin_reminders import reminder_answer
from bot.dev.standin_tools import call as tool_call, tool_answer
from bot.dev.standin_knowledge import EmbeddingRequests, reference_reply
from bot.dev.standin_site import send_site
from bot.llm.tokens import TokenCounter
from bot.observability.logs import configure_logging

CANNED_NOTICE = "(canned reply from the stand-in model)"
#: The message is quoted up to this many characters.
QUOTE_CHARS = 80
#: What the stand-in says it is on /v1/models ("owned_by"), so `eval` can tell.
STANDIN_OWNER = "bot-standin"
#: The Structured Outputs schema name of fact extraction (bot/memory/schema.py).
FACTS_SCHEMA_NAME = "user_facts"

_FILLER = (
    "Here is a short, practical answer. "
    "Let me know if you want more detail on any point. "
    "I can also suggest next steps if that helps. "
    "Tell me what matters most to you and I will focus on it. "
)


class StandinModel:
    """The stand-in's state and HTTP server; start() in a thread, or serve_forever()."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_s: float = 0.0,
        reply_chars: int = 240,
        record: str = "full",
    ) -> None:
        self.latency_s = latency_s
        #: Cleared, every answer waits until it is set again (at most a minute): a test holds
        #: the model for as long as it needs, on a machine of any speed.
        self.gate = threading.Event()
        self.gate.set()
        self.reply_chars = reply_chars
        self.record = record
        self._lock = threading.Lock()
        self._steps: list[Step] = []
        self._requests: list[dict[str, Any]] = []
        self._reported: list[dict[str, Any]] = []
        self._transcriptions: list[dict[str, Any]] = []
        self.embedding_requests = EmbeddingRequests()  # what its embeddings API was asked for
        #: The file names of the transcriptions stopped because their client went away (a
        #: timeout on its side), oldest first.
        self.cancelled: list[str] = []
        self._counter = TokenCounter("gpt-4o-mini")
        self.server = _Server((host, port), self._handler_class())
        self._thread: threading.Thread | None = None

    # -- control -----------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Return the base URL to give the openai client (ends in /v1)."""
        return "http://{}:{}/v1".format(*self.server.server_address[:2])

    def start(self) -> "StandinModel":
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.server.shutdown()
        self.server.server_close()

    def script(self, *steps: Step | dict[str, Any]) -> None:
        """Queue answers, consumed in order (a step with `match` waits for its request)."""
        with self._lock:
            self._steps.extend(s if isinstance(s, Step) else Step.from_obj(s) for s in steps)

    def reported(self) -> list[dict[str, Any]]:
        """Return the usage every successful answer reported: model, tokens, last user message."""
        with self._lock:
            return list(self._reported)

    def requests(self) -> list[dict[str, Any]]:
        """Return the chat request bodies received so far."""
        with self._lock:
            return list(self._requests)

    def embedded(self) -> list[tuple[str, str]]:
        """Return the (model, text) of every text its embeddings API was asked for, oldest first."""
        return self.embedding_requests.texts()

    def transcriptions(self) -> list[dict[str, Any]]:
        """Return the fields of the transcription requests received so far (never the audio)."""
        with self._lock:
            return list(self._transcriptions)

    def reset(self) -> None:
        """Forget the script and the recorded requests; open the gate."""
        self.gate.set()
        with self._lock:
            self._steps.clear()
            self._requests.clear()
            self._reported.clear()
            self._transcriptions.clear()
            self.embedding_requests.clear()
            self.cancelled.clear()

    # -- answering ---------------------------------------------------------------------
    def _next_step(self, subject: str, kind: str = "chat") -> Step | None:
        with self._lock:
            for i, step in enumerate(self._steps):
                if step.kind == kind and (step.match is None or step.match in subject):
                    return self._steps.pop(i)
        return None

    def canned_reply(self, last_user: str, images: list[SeenImage] | None = None, context: str = "") -> str:
        """Return the deterministic default answer to a message, the images it holds and what
        else reached the model (bot/dev/standin_given.py)."""
        seen = "".join(f"I see {image.describe()}. " for image in images or [])
        quoted = " ".join(last_user.split())
        quoted = quoted if len(quoted) <= QUOTE_CHARS else quoted[: QUOTE_CHARS - 1].rstrip() + "…"
        head = f"{CANNED_NOTICE} {seen}You said: “{quoted}”. "
        head += f"{context} " if context else ""
        text = head
        while len(text) < self.reply_chars:  # a reply as long as a real one (benchmarks); 0: just the notes
            text += _FILLER
        if len(text) > max(self.reply_chars, len(head)):
            text = text[: max(self.reply_chars, len(head))].rsplit(" ", 1)[0]
        return text.rstrip()

    @staticmethod
    def canned_json(body: dict[str, Any]) -> str:
        """Answer a Structured Outputs request: facts picked out of the user's first-person
        statements for fact extraction (bot/dev/standin_facts.py), the named things in the
        facts for pass 2 (bot/dev/standin_entities.py), a task with its flags for task
        extraction (bot/dev/standin_tasks.py), else the emptiest valid answer."""
        json_schema = (body.get("response_format") or {}).get("json_schema", {})
        properties = json_schema.get("schema", {}).get("properties", {})
        answer: dict[str, Any] = {name: [] for name, spec in properties.items() if spec.get("type") == "array"}
        if json_schema.get("name") == FACTS_SCHEMA_NAME:
            answer["facts"] = extract_request_facts(last_user_text(body.get("messages") or []))
        elif json_schema.get("name") == ENTITY_SCHEMA_NAME:
            answer["entities"] = extract_request_entities(last_user_text(body.get("messages") or []))
        elif json_schema.get("name") == TASK_SCHEMA_NAME:
            answer = extract_request_task(last_user_text(body.get("messages") or []))
        return json.dumps(answer)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
        """Return status, JSON body and delay for one chat completion request."""
        messages = body.get("messages") or []
        if not isinstance(messages, list) or not messages:
            return 400, {"error": {"message": "messages is required", "type": "invalid_request_error"}}, 0
        last_user = last_user_text(messages)
        if self.record == "full":
            with self._lock:
                self._requests.append(body)
        try:  # every image is billed, an earlier one too, so every one must decode
            images = [message_images(m) for m in messages]
        except InvalidImage as err:
            return 400, invalid_request(f"Invalid image: {err}.", code="invalid_image"), 0
        step = self._next_step(last_user) or Step()
        delay = self.latency_s + step.delay_s
        if step.status != 200:
            return step.status, self._scripted_error(step), delay
        content = step.content
        if step.tool_calls:
            calls, said = [tool_call(name, args) for name, args in step.tool_calls], None
        elif content is None and not wants_json(body):
            calls, said = reminder_answer(body, last_user) or tool_answer(body, last_user, date.today())
        else:
            calls, said = [], None
        content = "" if calls else (f"{CANNED_NOTICE} {said}" if said else content)
        if content is None:
            last_images = next((seen for m, seen in zip(messages[::-1], images[::-1]) if m.get("role") == "user"), [])
            content = self.canned_json(body) if wants_json(body) else summary_reply(messages) or (
                reference_reply(messages, CANNED_NOTICE, given(messages))
                or self.canned_reply(last_user, last_images, given(messages)))
        prompt_tokens = sum(  # the cookbook's count: framing, role and text per message, and images
            self._counter.message_cost(str(m.get("role", "")), "".join(text_parts(m.get("content"))))
            + sum(image.tokens() for image in seen) for m, seen in zip(messages, images)
        ) + 3
        completion_tokens = self._counter.count(content)
        with self._lock:  # what each answer reported, for usage accounting tests
            self._reported.append({"model": body.get("model") or "standin", "last_user": last_user,
                                   "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens})
        if self.record == "usage":  # just the figures, for long benchmark runs
            with self._lock:
                self._requests.append(
                    {"last_user": last_user[:120], "prompt_tokens": prompt_tokens,
                     "completion_tokens": completion_tokens, "model": body.get("model")}
                )
        payload = {
            "id": f"chatcmpl-standin-{hashlib.sha256(content.encode()).hexdigest()[:12]}",
            "object": "chat.completion", "created": int(time.time()), "model": body.get("model") or "standin",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content or None,
                                                 **({"tool_calls": calls} if calls else {})},
                         "finish_reason": "tool_calls" if calls else step.finish_reason, "logprobs": None}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        if step.stall_s:
            payload["_stall_s"] = step.stall_s
        return 200, payload, delay

    def transcribe(self, content_type: str, form: bytes, cancelled: Callable[[], bool] | None = None
                   ) -> tuple[int, dict[str, Any], float]:
        """Return status, body and delay for one transcription request (multipart/form-data);
        `cancelled()` says the client went away (the work stops: standin_audio.Cancelled)."""
        try:  # a malformed request, or audio that does not decode (AudioUnreadable)
            fields = standin_audio.parse_form(content_type, form)
            request = standin_audio.describe_request(fields)
            if self.record != "none":  # the fields, never the audio
                with self._lock:
                    self._transcriptions.append(request)
            step = self._next_step(request["filename"], kind="transcription") or Step(kind="transcription")
            if step.status != 200:
                return step.status, self._scripted_error(step), self.latency_s + step.delay_s
            try:
                payload = standin_audio.answer(fields["file"].value, request, step.content, cancelled)
            except standin_audio.Cancelled:
                with self._lock:
                    self.cancelled.append(request["filename"])
                raise
        except standin_audio.BadRequest as err:
            return 400, invalid_request(str(err), param=err.param), 0
        if step.stall_s:
            payload["_stall_s"] = step.stall_s
        return 200, payload, self.latency_s + step.delay_s

    @staticmethod
    def _scripted_error(step: Step) -> dict[str, Any]:
        error = {"error": {"message": f"scripted status {step.status}", "type": "standin_error"}}
        return error if step.retry_after is None else {**error, "retry_after": step.retry_after}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in separate writes; without this, delayed ACKs add ~40 ms.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: Any) -> None:
                retry_after = payload.pop("retry_after", None) if isinstance(payload, dict) else None
                stall = payload.pop("_stall_s", 0.0) if isinstance(payload, dict) else 0.0
                text = payload.get("_text") if isinstance(payload, dict) else None  # response_format text
                data = json.dumps(payload).encode() if text is None else text.encode()
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.send_header("Content-Type", "application/json" if text is None else "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if stall:  # a server that stalls mid-response
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    time.sleep(stall)
                    data = data[len(data) // 2 :]
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "standin", "object": "model", "owned_by": STANDIN_OWNER}]})
                elif self.path == "/_standin/requests":
                    self._send(200, {"requests": model.requests()})
                elif self.path == "/_standin/transcriptions":
                    self._send(200, {"transcriptions": model.transcriptions()})
                elif not send_site(self):  # the stand-in website, for the tour (bot/dev/standin_site.py)
                    self._send(404, {"error": {"message": "not found"}})

            def _send_later(self, status: int, payload: Any, delay: float) -> None:
                model.gate.wait(timeout=60)
                until = time.monotonic() + delay
                while time.monotonic() < until:  # a client that gives up ends the wait
                    if self._client_gone():
                        return
                    time.sleep(min(0.05, max(0.0, until - time.monotonic())))
                self._send(status, payload)

            def _client_gone(self) -> bool:
                return client_gone(self.connection)

            def do_POST(self) -> None:  # noqa: N802
                raw = self._body()
                if self.path.rstrip("/") == "/v1/audio/transcriptions":  # a form, not JSON
                    try:
                        answer = model.transcribe(self.headers.get("Content-Type", ""), raw, self._client_gone)
                    except standin_audio.Cancelled:  # recorded in model.cancelled
                        self.close_connection = True
                        return
                    self._send_later(*answer)
                    return
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "invalid JSON"}})
                    return
                if self.path.rstrip("/") == "/v1/chat/completions":
                    self._send_later(*model.answer(body))
                elif self.path.rstrip("/") == "/v1/embeddings":
                    self._send_later(*model.embedding_requests.answer(body, model.record == "full"), model.latency_s)
                elif self.path == "/_standin/script":
                    model.script(*body.get("steps", []))
                    self._send(200, {"queued": len(body.get("steps", []))})
                elif self.path == "/_standin/reset":
                    model.reset()
                    self._send(200, {"reset": True})
                else:
                    self._send(404, {"error": {"message": "not found"}})

        return Handler


def main(argv: list[str] | None = None) -> int:
    """Run the stand-in until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m bot.dev.standin", description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--reply-chars", type=int, default=240)
    parser.add_argument("--record", choices=["full", "usage", "none"], default="full",
                        help="keep whole request bodies, only token figures (benchmarks), or nothing")
    args = parser.parse_args(argv)
    configure_logging(os.environ.get("LOG_LEVEL", "INFO"))
    if os.environ.get("APP_ENV") == "production":
        print("refusing to start the stand-in model with APP_ENV=production", file=sys.stderr)
        return 2
    model = StandinModel(args.host, args.port, args.latency_ms / 1000, args.reply_chars, args.record)
    print(f"stand-in model (offline): its replies say what reached it; facts from plain statements; at {model.url}",
          file=sys.stderr, flush=True)
    try:
        model.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        model.server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
