"""A local stand-in of Twilio's Messages API, for tests and benchmarks of REPLY_MODE=rest.

The bot reaches it through the real twilio client (TWILIO_API_BASE_URL points here), so the
request is exactly what Twilio would get: POST /2010-04-01/Accounts/<AC…>/Messages.json with
Basic auth and a form (From, To, Body, StatusCallback). It checks the credentials, records
every message and answers as Twilio does (201 and the message resource), or with a scripted
error. Never for production; loopback only.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

_MESSAGES = re.compile(r"^/2010-04-01/Accounts/(AC[0-9a-fA-F]{32})/Messages\.json$")


class TwilioStandin:
    """Records the messages the bot sends; start() serves on 127.0.0.1 in a thread."""

    def __init__(self, account_sid: str, auth_token: str, latency_s: float = 0.0) -> None:
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.latency_s = latency_s
        self.lock = threading.Lock()
        self.sent: list[dict[str, str]] = []
        self.failures: list[tuple[int, int]] = []  # (HTTP status, Twilio error code), next first
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        """The base URL to give the twilio client (TWILIO_API_BASE_URL)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> "TwilioStandin":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def fail_next(self, status: int = 400, code: int = 21211) -> None:
        """Answer the next message with this error (21211: invalid To; 20429: too many requests)."""
        with self.lock:
            self.failures.append((status, code))

    def messages(self) -> list[dict[str, str]]:
        with self.lock:
            return list(self.sent)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[dict[str, str]]:
        """Wait until `count` messages arrived; return them."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(self.messages()) < count:
            time.sleep(0.02)
        return self.messages()

    def _authorized(self, header: str) -> bool:
        expected = base64.b64encode(f"{self.account_sid}:{self.auth_token}".encode()).decode()
        return header == f"Basic {expected}"

    def _create(self, account: str, auth: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if account != self.account_sid or not self._authorized(auth):
            return 401, {"code": 20003, "message": "Authenticate", "status": 401}
        with self.lock:
            failure = self.failures.pop(0) if self.failures else None
        if failure:
            return failure[0], {"code": failure[1], "message": "scripted failure", "status": failure[0]}
        if not form.get("To") or not form.get("From") or not form.get("Body"):
            return 400, {"code": 21604, "message": "A 'To', 'From' and 'Body' are required", "status": 400}
        sid = "SM" + uuid.uuid4().hex
        record = {**form, "Sid": sid}
        with self.lock:
            self.sent.append(record)
        return 201, {
            "sid": sid, "account_sid": account, "from": form["From"], "to": form["To"], "body": form["Body"],
            "status": "queued", "num_segments": "1", "direction": "outbound-api", "api_version": "2010-04-01",
            "uri": f"/2010-04-01/Accounts/{account}/Messages/{sid}.json",
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                match = _MESSAGES.match(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(parse_qsl(self.rfile.read(length).decode()))
                if standin.latency_s:
                    time.sleep(standin.latency_s)
                if match is None:
                    status, body = 404, {"code": 20404, "message": "not found", "status": 404}
                else:
                    status, body = standin._create(match.group(1), self.headers.get("Authorization", ""), form)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler
