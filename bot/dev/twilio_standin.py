"""A local stand-in of Twilio's Messages API and Media URLs, for tests, benchmarks and `make run`.

The bot reaches it through the real twilio client (TWILIO_API_BASE_URL points here), so the
request is exactly what Twilio would get: POST /2010-04-01/Accounts/<AC…>/Messages.json with
Basic auth and a form (From, To, Body or a template's ContentSid, StatusCallback). It checks the credentials, records
every message and answers as Twilio does (201 and the message resource), or with a scripted
error.

Media are served as Twilio serves them: GET /2010-04-01/Accounts/<AC…>/Messages/<MM…>/Media/<ME…>
needs Basic auth (the account SID and auth token, or an API key pair) and answers 307 to a
CDN URL on a second server on another port, so the redirect is cross-origin as Twilio's is.
The CDN needs no credentials and, like S3 with a signed URL, refuses a request that has some.
Each media item can script a fault (MediaBehaviour). Every request to either server is recorded.

    python -m bot.dev.twilio_standin --port 8090 --account-sid AC… --auth-token …

    POST /_standin/media?message_sid=MM…   the raw bytes, with their Content-Type → {"url": …}
    GET  /_standin/messages?to=whatsapp:+…&after=N   the messages sent to that number, from the
                                                      N-th on (`chat` shows deferred replies)

The Content API's templates (GET /v1/ContentAndApprovals) are bot/dev/twilio_answers.py's.

Typing indicators are taken as Twilio's Messaging v2 takes them (POST /v2/Indicators/Typing.json,
channel=whatsapp and the inbound messageId, Basic auth) and recorded (`typing()`); the bot
reaches them at TWILIO_MESSAGING_BASE_URL, pointed here.

Never for production: it refuses to start with APP_ENV=production; loopback only.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qs, parse_qsl, urlsplit

from bot.dev.twilio_answers import CONTENT_PATH as _CONTENT, content_page, error as _error, message_feed

_MESSAGES = re.compile(r"^/2010-04-01/Accounts/(AC[0-9a-fA-F]{32})/Messages\.json$")
_MEDIA = re.compile(r"^/2010-04-01/Accounts/(AC[0-9a-fA-F]{32})/Messages/([A-Za-z]{2}[0-9a-fA-F]{32})/Media/"
                    r"(ME[0-9a-fA-F]{32})$")
_CDN = re.compile(r"^/media/([0-9a-f]{32})$")
_TYPING = "/v2/Indicators/Typing.json"
_SID = re.compile(r"^[A-Za-z]{2}[0-9a-fA-F]{32}$")

@dataclass(frozen=True)
class MediaBehaviour:
    """How one media item is served: as Twilio does by default; each field scripts a fault."""

    api_status: int | None = None  # the API answers this error (401, 404, 500) instead of redirecting
    api_location: str | None = None  # the API redirects here instead of to the CDN
    cdn_redirects: int = 0  # the CDN first redirects to itself this many times (a loop, if large)
    cdn_delay_s: float = 0.0  # the CDN waits this long before its headers
    framing: Literal["length", "chunked", "close"] = "length"  # Content-Length; chunked; neither (until close)
    content_length: int | None = None  # announce this length instead of the true one (a lie)
    piece_bytes: int = 0  # send the body in pieces of this many bytes (0: at once),
    piece_gap_s: float = 0.0  # this long apart: a trickle, or a stall after the first piece
    cut_after: int | None = None  # close the connection after this many bytes of the body


@dataclass(frozen=True)
class _Media:
    sid: str
    message_sid: str
    data: bytes
    content_type: str
    behaviour: MediaBehaviour
    token: str  # the CDN URL's secret part


class TwilioStandin:
    """Records the messages the bot sends and serves media; start() serves on 127.0.0.1 in threads."""

    def __init__(self, account_sid: str, auth_token: str, latency_s: float = 0.0, *,
                 api_key: tuple[str, str] | None = None, port: int = 0, cdn_port: int = 0) -> None:
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.api_key = api_key
        self.latency_s = latency_s
        self.lock = threading.Lock()
        self.sent: list[dict[str, str]] = []
        self.indicators: list[dict[str, Any]] = []  # typing indicators: messageId, channel, at (monotonic)
        self.typing_status: int = 200  # what a typing indicator is answered (a test may script a failure)
        self.failures: list[tuple[int, int]] = []  # (HTTP status, Twilio error code), next first
        self.media: dict[str, _Media] = {}  # by media SID
        self._by_token: dict[str, _Media] = {}
        self._hits: list[dict[str, Any]] = []
        self._stopping = threading.Event()  # ends a trickle or a delay at stop()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self.cdn = ThreadingHTTPServer(("127.0.0.1", cdn_port), self._cdn_handler())
        self.cdn.daemon_threads = True

    @property
    def url(self) -> str:  # the base URL to give the twilio client (TWILIO_API_BASE_URL)
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def cdn_url(self) -> str:  # the origin of the CDN the Media URLs redirect to
        return f"http://127.0.0.1:{self.cdn.server_address[1]}"

    def start(self) -> "TwilioStandin":
        for server in (self.server, self.cdn):  # polled often: stop() waits for a poll of each
            threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for server in (self.server, self.cdn):
            server.shutdown()
            server.server_close()

    def fail_next(self, status: int = 400, code: int = 21211) -> None:
        """Answer the next message with this error (21211: invalid To; 20429: too many requests)."""
        with self.lock:
            self.failures.append((status, code))

    def messages(self) -> list[dict[str, str]]:  # every message sent, oldest first
        with self.lock:
            return list(self.sent)

    def typing(self) -> list[dict[str, Any]]:
        """Return the typing indicators received, oldest first."""
        with self.lock:
            return [dict(i) for i in self.indicators]

    def _typing(self, auth: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if not self._authorized(auth):
            return 401, _error(401, "Authenticate")
        if form.get("channel") != "whatsapp" or not _SID.match(form.get("messageId", "")):
            return 400, {"code": 21211, "message": "channel=whatsapp and a messageId are required", "status": 400}
        with self.lock:
            self.indicators.append({**form, "at": time.monotonic()})
            status = self.typing_status
        if status != 200:
            return status, _error(status, "scripted failure")
        return 200, {"success": True}

    def _feed(self, query: str) -> tuple[int, dict[str, Any]]:
        """GET /_standin/messages: the messages sent to one number, from the `after`-th on."""
        return 200, message_feed(self.messages(), query)

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[dict[str, str]]:
        """Wait until `count` messages arrived; return them."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(self.messages()) < count:
            time.sleep(0.02)
        return self.messages()

    def add_media(self, message_sid: str, data: bytes, content_type: str,
                  behaviour: MediaBehaviour | None = None) -> str:
        """Keep a media item of this message and return its Media URL, as in Twilio's webhook."""
        media = _Media("ME" + uuid.uuid4().hex, message_sid, data, content_type, behaviour or MediaBehaviour(),
                       uuid.uuid4().hex)
        with self.lock:
            self.media[media.sid] = media
            self._by_token[media.token] = media
        return f"{self.url}/2010-04-01/Accounts/{self.account_sid}/Messages/{message_sid}/Media/{media.sid}"

    def hits(self) -> list[dict[str, Any]]:
        """Every request to either server, oldest first: server ("api"/"cdn"), method, path,
        authorization (whether the header was there) and, on the api only, its value."""
        with self.lock:
            return [dict(hit) for hit in self._hits]

    def _record(self, server: str, handler: BaseHTTPRequestHandler) -> None:
        header = handler.headers.get("Authorization")
        hit: dict[str, Any] = {"server": server, "method": handler.command, "path": handler.path,
                               "authorization": header is not None}
        if server == "api":
            hit["authorization_value"] = header
        with self.lock:
            self._hits.append(hit)

    def _authorized(self, header: str) -> bool:
        pairs = [(self.account_sid, self.auth_token)] + ([self.api_key] if self.api_key else [])
        return any(header == "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
                   for user, secret in pairs)

    def _create(self, account: str, auth: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if account != self.account_sid or not self._authorized(auth):
            return 401, _error(401, "Authenticate")
        with self.lock:
            failure = self.failures.pop(0) if self.failures else None
        if failure:
            return failure[0], {"code": failure[1], "message": "scripted failure", "status": failure[0]}
        if not form.get("To") or not form.get("From") or not (form.get("Body") or form.get("ContentSid")):
            return 400, {"code": 21604, "message": "A 'To', 'From' and 'Body' are required", "status": 400}
        sid = "SM" + uuid.uuid4().hex
        record = {**form, "Sid": sid}
        with self.lock:
            self.sent.append(record)
        return 201, {
            "sid": sid, "account_sid": account, "from": form["From"], "to": form["To"], "body": form.get("Body", ""),
            "status": "queued", "num_segments": "1", "direction": "outbound-api", "api_version": "2010-04-01",
            "uri": f"/2010-04-01/Accounts/{account}/Messages/{sid}.json",
        }

    def _templates(self, auth: str) -> tuple[int, dict[str, Any]]:
        """Answer GET /v1/ContentAndApprovals: the account's templates, one page."""
        return (200, content_page(self.account_sid)) if self._authorized(auth) else (401, _error(401, "Authenticate"))

    def _media_answer(self, path: str, auth: str) -> tuple[int, dict[str, Any] | str]:
        """Answer a GET on a Media URL: an error body, or the Location to redirect to."""
        match = _MEDIA.match(path)
        if match is None:
            return 404, _error(404, f"The requested resource {path} was not found")
        if match.group(1) != self.account_sid or not self._authorized(auth):
            return 401, _error(401, "Authentication Error - invalid username")
        with self.lock:
            media = self.media.get(match.group(3))
        if media is None or media.message_sid != match.group(2):
            return 404, _error(404, f"The requested resource {path} was not found")
        if media.behaviour.api_status:
            return media.behaviour.api_status, _error(media.behaviour.api_status, "scripted failure")
        return 307, media.behaviour.api_location or f"{self.cdn_url}/media/{media.token}"

    def _upload(self, query: str, content_type: str, data: bytes) -> tuple[int, dict[str, Any]]:
        """POST /_standin/media: keep an uploaded file as a media item and return its URL."""
        message_sid = (parse_qs(query).get("message_sid") or [""])[0]
        if not _SID.match(message_sid) or not content_type:
            return 400, {"message": "give ?message_sid=MM… and a Content-Type"}
        return 201, {"url": self.add_media(message_sid, data, content_type)}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                standin._record("api", self)
                parts = urlsplit(self.path)
                if parts.path == "/_standin/messages":
                    self._json(*standin._feed(parts.query))
                    return
                if parts.path == _CONTENT:  # TWILIO_CONTENT_BASE_URL points here
                    self._json(*standin._templates(self.headers.get("Authorization", "")))
                    return
                status, answer = standin._media_answer(urlsplit(self.path).path,
                                                       self.headers.get("Authorization", ""))
                if isinstance(answer, str):
                    self.send_response(status)
                    self.send_header("Location", answer)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    self._json(status, answer)

            def do_POST(self) -> None:  # noqa: N802
                standin._record("api", self)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                parts = urlsplit(self.path)
                if parts.path == "/_standin/media":
                    self._json(*standin._upload(parts.query, self.headers.get("Content-Type", ""), raw))
                    return
                match = _MESSAGES.match(self.path)
                form = dict(parse_qsl(raw.decode()))
                if parts.path == _TYPING:
                    self._json(*standin._typing(self.headers.get("Authorization", ""), form))
                    return
                if standin.latency_s:
                    time.sleep(standin.latency_s)
                if match is None:
                    self._json(404, {"code": 20404, "message": "not found", "status": 404})
                else:
                    self._json(*standin._create(match.group(1), self.headers.get("Authorization", ""), form))

            def _json(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                if status == 401:
                    self.send_header("WWW-Authenticate", 'Basic realm="Twilio API"')
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler

    def _cdn_handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class CdnHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # for chunked bodies and kept-alive connections

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                standin._record("cdn", self)
                parts = urlsplit(self.path)
                match = _CDN.match(parts.path)
                with standin.lock:
                    media = standin._by_token.get(match.group(1)) if match else None
                if self.headers.get("Authorization") is not None:  # S3: one auth mechanism only
                    self._plain(400, b"Only one auth mechanism allowed")
                elif media is None:
                    self._plain(404, b"Not Found")
                else:
                    hop = int((parse_qs(parts.query).get("hop") or ["0"])[0])
                    if hop < media.behaviour.cdn_redirects:  # relative, as a CDN may send it
                        self.send_response(302)
                        self.send_header("Location", f"/media/{media.token}?hop={hop + 1}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                    else:
                        self._serve(media)

            def _plain(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _serve(self, media: _Media) -> None:
                how = media.behaviour
                if how.cdn_delay_s and standin._stopping.wait(how.cdn_delay_s):
                    return
                self.send_response(200)
                self.send_header("Content-Type", media.content_type)
                if how.framing == "length":
                    length = len(media.data) if how.content_length is None else how.content_length
                    self.send_header("Content-Length", str(length))
                elif how.framing == "chunked":
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Connection", "close")
                self.end_headers()
                body = media.data if how.cut_after is None else media.data[:how.cut_after]
                size = how.piece_bytes or len(body) or 1
                chunked = how.framing == "chunked"
                whole = how.cut_after is None and how.content_length is None
                try:
                    for start in range(0, len(body), size):
                        if start and how.piece_gap_s and standin._stopping.wait(how.piece_gap_s):
                            whole = False
                            break
                        piece = body[start:start + size]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                        self.wfile.flush()
                    if chunked and whole:
                        self.wfile.write(b"0\r\n\r\n")
                except OSError:  # the client gave up (a cap, a deadline): that is what was tested
                    whole = False
                if not whole:  # a cut or a lie leaves the connection unusable: close it
                    self.close_connection = True

        return CdnHandler


def main(argv: list[str] | None = None) -> int:
    """Run the stand-in until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m bot.dev.twilio_standin", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--cdn-port", type=int, default=0, help="the media CDN's port (default: any free one)")
    parser.add_argument("--account-sid", required=True)
    parser.add_argument("--auth-token", required=True)
    parser.add_argument("--api-key-sid")
    parser.add_argument("--api-key-secret")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    if os.environ.get("APP_ENV") == "production":
        print("refusing to start the Twilio stand-in with APP_ENV=production", file=sys.stderr)
        return 2
    api_key = (args.api_key_sid, args.api_key_secret) if args.api_key_sid and args.api_key_secret else None
    standin = TwilioStandin(args.account_sid, args.auth_token, args.latency_ms / 1000, api_key=api_key,
                            port=args.port, cdn_port=args.cdn_port).start()
    print(f"Twilio stand-in: Messages API and Media URLs at {standin.url}, media CDN at {standin.cdn_url}",
          file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        standin.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
