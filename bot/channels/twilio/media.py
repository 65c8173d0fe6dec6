"""Download an inbound message's media (a voice note, a photo) from Twilio's API.

MediaUrl0 comes in the webhook's form, which anyone who can reach the webhook controls (a valid
signature only says Twilio sent it, and the signature check may be off in development). So
`check` accepts nothing but a Media resource of our account and of this message, at the API's
own origin, before a single byte is sent; the credentials go to that origin and nowhere else.

Twilio answers the Media URL with a redirect (307) to a short-lived CDN URL on another host. We
follow it ourselves, without credentials (the CDN URL is signed; S3 even refuses a request that
carries both), never from https down to http. One deadline covers the whole fetch, redirects and
body included, and the body stops at max_bytes however it is framed.
"""

from __future__ import annotations

import http.cookiejar
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import structlog

try:  # the openai SDK now depends on httpx2, the maintained fork of httpx, with the same API
    import httpx2 as httpx
except ImportError:  # pragma: no cover - an environment with httpx only
    import httpx  # type: ignore[no-redef]

from bot.exceptions import ConfigError, MediaUnavailable

log = structlog.get_logger(__name__)

#: Exactly the path of one media item; anything else (Media.json, a list, a Messages URL) is not.
_MEDIA_PATH = re.compile(r"^/2010-04-01/Accounts/([^/]+)/Messages/([^/]+)/Media/([^/]+)$")
_MEDIA_SID = re.compile(r"^ME[0-9a-fA-F]{32}$")
_MESSAGE_SID = re.compile(r"^[A-Za-z]{2}[0-9a-fA-F]{32}$")
#: Never in a Media URL Twilio sends: a query, a fragment, userinfo, percent-encoding (which
#: could hide a "/" or ".."), a backslash (some parsers read it as "/"), spaces, non-ASCII.
_ODD = re.compile(r"[^\x21-\x7e]|[?#@%\\]")
#: A Location may have a query (the CDN's signature) but no spaces, control characters or non-ASCII.
_UNSAFE_LOCATION = re.compile(r"[^\x21-\x7e]|\\")
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = (301, 302, 303, 307, 308)
#: What the client may raise: transport errors, and the odd invalid URL or stream misuse.
_HTTPX_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError)


@dataclass(frozen=True)
class FetchedMedia:
    data: bytes
    content_type: str  # the final response's Content-Type, lower-cased, parameters kept
    redirects: int


@dataclass
class _Trace:
    """Where a fetch got to, for its log line: never the path, which names account and message."""

    host: str | None = None
    status: int | None = None


def _origin(url: str) -> tuple[str, str, int]:
    """Return (scheme, host, port) with the default port filled in; ValueError if there is none."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError("not an http(s) URL with a host")
    return scheme, parts.hostname, parts.port or _DEFAULT_PORTS[scheme]


class MediaFetcher:
    """Fetches Twilio Media URLs of one account: one httpx client, reused across fetches."""

    def __init__(self, api_base_url: str, account_sid: str | None, username: str, password: str, *,
                 connect_timeout_s: float = 3.0, read_timeout_s: float = 5.0, max_redirects: int = 3,
                 transport: httpx.BaseTransport | None = None) -> None:
        try:
            self.api_origin = _origin(api_base_url)
        except ValueError:
            raise ConfigError(f"api_base_url {api_base_url!r} is not an http(s) URL") from None
        self.account_sid = account_sid or None
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.max_redirects = max_redirects
        self._auth = httpx.BasicAuth(username, password)
        self._client = httpx.Client(
            transport=transport,
            follow_redirects=False,  # each hop is checked here, and only the first has credentials
            trust_env=False,  # no HTTPS_PROXY (or other variable) decides where our credentials go
            # No cookie jar shared between users' fetches: whatever a CDN sets is dropped.
            cookies=http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
            # The body is read raw, so that max_bytes counts what arrives; ask for no compression.
            headers={"Accept-Encoding": "identity"},
        )

    def check(self, url: str, message_sid: str) -> None:
        """Raise MediaUnavailable(refused=True) unless url is a Media resource of our account and this message."""
        host = None
        try:
            if not self.account_sid:
                raise MediaUnavailable("no_account", "no Twilio account configured", refused=True)
            if _ODD.search(url):
                raise MediaUnavailable("bad_url", refused=True)
            try:
                parts = urlsplit(url)
                host = parts.hostname
                origin = _origin(url)
            except ValueError:  # no host, another scheme, a port that is not a number
                raise MediaUnavailable("bad_url", refused=True) from None
            if origin != self.api_origin:
                raise MediaUnavailable("foreign_origin", f"host {host}", refused=True)
            segments = parts.path.split("/")[1:]
            if any(s in ("", ".", "..") for s in segments):
                raise MediaUnavailable("bad_url", refused=True)
            match = _MEDIA_PATH.match(parts.path)
            if match is None or not _MEDIA_SID.match(match.group(3)):
                raise MediaUnavailable("not_media", refused=True)
            if match.group(1) != self.account_sid:
                raise MediaUnavailable("other_account", refused=True)
            if match.group(2) != message_sid or not _MESSAGE_SID.match(message_sid):
                raise MediaUnavailable("other_message", refused=True)
        except MediaUnavailable as err:
            log.warning("media.refused", reason=err.reason, host=host[:100] if host else None)
            raise

    def fetch(self, url: str, message_sid: str, *, max_bytes: int, deadline_s: float) -> FetchedMedia:
        """Check url, then download it through Twilio's redirect within max_bytes and deadline_s."""
        self.check(url, message_sid)
        started = time.monotonic()
        trace = _Trace()
        try:
            media = self._follow(url, max_bytes, started + deadline_s, trace)
        except MediaUnavailable as err:
            log.warning("media.fetch_failed", reason=err.reason, status=trace.status, host=trace.host,
                        duration_ms=_ms_since(started))
            raise
        log.info("media.fetched", bytes=len(media.data), redirects=media.redirects,
                 content_type=media.content_type, duration_ms=_ms_since(started))
        return media

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def _follow(self, url: str, max_bytes: int, deadline: float, trace: _Trace) -> FetchedMedia:
        """GET url with credentials, then each redirect without, up to the final answer's body."""
        current, redirects = url, 0
        while True:
            trace.host, trace.status = urlsplit(current).hostname, None
            request = self._client.build_request("GET", current, timeout=self._timeout(deadline))
            response = self._send(request, self._auth if redirects == 0 else None)
            try:
                trace.status = response.status_code
                location = response.headers.get("location")
                if response.status_code in _REDIRECTS and location:
                    if redirects >= self.max_redirects:
                        raise MediaUnavailable("too_many_redirects", f"more than {self.max_redirects}")
                    current, redirects = _redirect_target(current, location), redirects + 1
                    continue
                _raise_for_status(response)
                data = _read_body(response, max_bytes, deadline)
                content_type = response.headers.get("content-type", "").strip().lower()
                return FetchedMedia(data=data, content_type=content_type, redirects=redirects)
            finally:
                response.close()

    def _timeout(self, deadline: float) -> httpx.Timeout:
        """Each phase's timeout: the configured one, or the time left if that is shorter."""
        left = deadline - time.monotonic()
        if left <= 0:
            raise MediaUnavailable("timeout", "deadline passed")
        connect, read = min(self.connect_timeout_s, left), min(self.read_timeout_s, left)
        return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)

    def _send(self, request: httpx.Request, auth: httpx.BasicAuth | None) -> httpx.Response:
        """Send one request and return its response with the body still unread."""
        try:
            return self._client.send(request, stream=True, auth=auth)
        except _HTTPX_ERRORS as err:
            raise _transport_error(err) from err


def _redirect_target(current: str, location: str) -> str:
    """Resolve a Location against the current URL; refuse anything but http(s) without a downgrade."""
    if _UNSAFE_LOCATION.search(location):
        raise MediaUnavailable("insecure_redirect", "a Location with spaces or odd characters")
    target = urljoin(current, location)
    try:
        scheme, host, _ = _origin(target)
    except ValueError:
        raise MediaUnavailable("insecure_redirect", "not an http(s) URL") from None
    if "@" in urlsplit(target).netloc:  # httpx would turn userinfo into an Authorization header
        raise MediaUnavailable("insecure_redirect", f"userinfo in the URL ({host})")
    if urlsplit(current).scheme.lower() == "https" and scheme != "https":
        raise MediaUnavailable("insecure_redirect", f"https to {scheme} ({host})")
    return target.split("#", 1)[0]


def _raise_for_status(response: httpx.Response) -> None:
    """Raise MediaUnavailable for anything but a 2xx with an unencoded body."""
    status = response.status_code
    if status in (401, 403):
        raise MediaUnavailable("unauthorized", str(status))
    if status in (404, 410):
        raise MediaUnavailable("not_found", str(status))
    if not 200 <= status < 300:
        raise MediaUnavailable("http_status", str(status))
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":  # we asked for none; the raw bytes would not be the media
        raise MediaUnavailable("http_status", f"{status} with Content-Encoding {encoding[:40]}")


def _read_body(response: httpx.Response, max_bytes: int, deadline: float) -> bytes:
    """Read the body, stopping past max_bytes or at the deadline however slowly it comes."""
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > max_bytes:  # refused before a byte of the body is read
        raise MediaUnavailable("too_large", f"Content-Length {length} over {max_bytes}")
    body = bytearray()
    with _Watchdog(response, deadline) as watchdog:
        try:
            for chunk in response.iter_raw():
                body += chunk
                if len(body) > max_bytes:
                    raise MediaUnavailable("too_large", f"over {max_bytes} bytes")
                if time.monotonic() > deadline:  # a trickle: every read is quick, the whole is not
                    raise MediaUnavailable("timeout", f"{len(body)} bytes by the deadline")
        except _HTTPX_ERRORS as err:
            if watchdog.fired:
                raise MediaUnavailable("timeout", f"{len(body)} bytes by the deadline") from err
            raise _transport_error(err) from err
    if not body:
        raise MediaUnavailable("empty", "0 bytes")
    return bytes(body)


class _Watchdog:
    """Cut a response's connection at the deadline.

    httpx times each read, with the timeout fixed when the body starts: a server that sends a
    few bytes and then stalls would hold us up to one more read timeout past the deadline.
    """

    def __init__(self, response: httpx.Response, deadline: float) -> None:
        stream = response.extensions.get("network_stream")
        self._socket: Any = stream.get_extra_info("socket") if stream is not None else None
        self._lock = threading.Lock()
        self._armed = isinstance(self._socket, socket.socket)
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._cut)
        self._timer.daemon = True
        self.fired = False

    def __enter__(self) -> "_Watchdog":
        if self._armed:
            self._timer.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:  # disarmed before the connection can go back to the pool
            self._armed = False
        self._timer.cancel()

    def _cut(self) -> None:
        with self._lock:
            if not self._armed:
                return
            self.fired = True
            try:  # socket.socket's own shutdown, also for TLS: the blocked read ends at once
                socket.socket.shutdown(self._socket, socket.SHUT_RDWR)
            except OSError:
                pass



def _transport_error(err: Exception) -> MediaUnavailable:
    """Translate an httpx error; the detail is the error's type, as its text may hold the URL."""
    if isinstance(err, httpx.TimeoutException):
        return MediaUnavailable("timeout", type(err).__name__)
    return MediaUnavailable("connection", type(err).__name__)


def _ms_since(started: float) -> int:
    return round((time.monotonic() - started) * 1000)
