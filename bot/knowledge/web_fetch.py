"""Fetching the business's web pages for the knowledge base, safely (docs/knowledge.md).

An operator names a URL; a page then names others (links, a sitemap, redirects), so every
address is checked as if an attacker had written it:
- http and https only, no userinfo, default or explicit ports;
- the host is resolved once per request, and every address it resolves to must be public:
  no private, loopback, link-local, multicast, reserved or unspecified address (unless
  KB_ALLOW_PRIVATE_URLS=1, for a site on the business's own network or `make run`'s
  stand-in). The connection then goes to the address that was checked, the URL's host kept
  for the Host header and TLS (SNI and the certificate), so a DNS answer that changes
  between the check and the connection (rebinding) cannot reach another address;
- redirects are followed by hand, each hop checked again, at most MAX_REDIRECTS, never from
  https down to http;
- only text, HTML, XML (sitemaps) and PDF are read; the body stops at its byte cap (by its
  Content-Length before a byte is read, else as it arrives) and the whole fetch at its
  deadline;
- no cookies, no proxy from the environment, no compression (the cap counts what arrives).
Conditional GETs (ETag, Last-Modified) make an unchanged page a 304 with no body.
"""

from __future__ import annotations

import http.cookiejar
import ipaddress
import socket
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urljoin, urlsplit, urlunsplit

import structlog

if TYPE_CHECKING:
    import httpx2 as httpx

log = structlog.get_logger(__name__)


def httpx_module() -> ModuleType:
    """The HTTP client, loaded when a page is first fetched (the CLI's other commands never
    pay for it): httpx2, the maintained fork of httpx the openai SDK depends on."""
    try:
        import httpx2
        return httpx2
    except ImportError:  # pragma: no cover - an environment with httpx only
        import httpx as plain
        return plain

MAX_REDIRECTS = 5
USER_AGENT = "whatsapp-gpt-bot-kb/1 (+knowledge base sync)"
#: What is read, by the Content-Type's media type; anything else is refused unread.
READABLE = {
    "text/html": "html", "application/xhtml+xml": "html", "text/plain": "text", "text/markdown": "markdown",
    "application/pdf": "pdf", "application/xml": "xml", "text/xml": "xml",
}
_DEFAULT_PORTS = {"http": 80, "https": 443}
_REDIRECTS = (301, 302, 303, 307, 308)


def transport_errors() -> tuple[type[Exception], ...]:
    """What the client may raise: transport errors, and the odd invalid URL or stream misuse."""
    client = httpx_module()
    return (client.HTTPError, client.InvalidURL, client.StreamError)


class FetchError(Exception):
    """A URL that was refused or could not be read; `reason` is short and stable."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Page:
    """One fetched URL: its final address, what it is, and what a conditional GET needs."""

    url: str  # after redirects
    status: int  # 200, or 304 (not modified: no body)
    kind: str  # html, text, markdown, pdf, xml ("" for a 304)
    data: bytes
    etag: str = ""
    last_modified: str = ""


def public_address(address: str) -> bool:
    """True for an address the internet routes to anyone: not private, loopback, link-local,
    multicast, reserved or unspecified (an IPv4-mapped IPv6 address is judged as IPv4)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_multicast or ip.is_reserved
                or ip.is_unspecified or (isinstance(ip, ipaddress.IPv4Address) and ip in _SHARED))


_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not public either


def split_url(url: str) -> tuple[str, str, int]:
    """Return (scheme, host, port) of an http(s) URL; raise FetchError for anything else."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port
    except ValueError:
        raise FetchError("bad_url", "not a URL") from None
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise FetchError("bad_url", "only http(s) URLs with a host")
    if parts.username is not None or parts.password is not None:
        raise FetchError("bad_url", "userinfo in the URL")
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def normalize(url: str) -> str:
    """Return a URL as the knowledge base keys it: no fragment, the scheme and host in lower
    case, the default port dropped, "/" for an empty path."""
    scheme, host, port = split_url(url)
    parts = urlsplit(url)
    netloc = f"[{host}]" if ":" in host else host
    if port != _DEFAULT_PORTS[scheme]:
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


Resolver = Callable[[str, int], list[str]]


def system_resolver(host: str, port: int) -> list[str]:
    """Return every address the host resolves to."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:
        raise FetchError("dns", str(err)[:100]) from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class WebFetcher:
    """GET web pages for the knowledge base, with every guard above; one client, reused."""

    def __init__(self, *, allow_private: bool = False, max_bytes: int = 2 * 1024 * 1024,
                 timeout_s: float = 10.0, resolver: Resolver = system_resolver,
                 transport: Any = None) -> None:
        httpx = httpx_module()
        self.allow_private = allow_private
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.resolver = resolver
        self._client = httpx.Client(
            transport=transport, follow_redirects=False, trust_env=False,
            cookies=http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),
            headers={"Accept-Encoding": "identity", "User-Agent": USER_AGENT,
                     "Accept": "text/html,application/xhtml+xml,text/plain,application/pdf,application/xml;q=0.9"},
        )

    def close(self) -> None:
        self._client.close()

    def check(self, url: str) -> tuple[str, str, int, str]:
        """Return (scheme, host, port, address) once the URL and its host's every address are
        allowed; raise FetchError(refused) otherwise."""
        scheme, host, port = split_url(url)
        addresses = self.resolver(host, port)
        if not addresses:
            raise FetchError("dns", f"{host} has no address")
        if not self.allow_private:
            refused = [a for a in addresses if not public_address(a)]
            if refused:
                raise FetchError("private_address", f"{host} resolves to {refused[0]} (KB_ALLOW_PRIVATE_URLS)")
        return scheme, host, port, addresses[0]

    def get(self, url: str, *, etag: str = "", last_modified: str = "", max_bytes: int | None = None,
            accept: frozenset[str] | None = None) -> Page:
        """GET a URL (conditionally, with the validators given), following redirects by hand;
        raise FetchError."""
        deadline = time.monotonic() + self.timeout_s
        cap = self.max_bytes if max_bytes is None else max_bytes
        current = url.split("#", 1)[0]
        for _ in range(MAX_REDIRECTS + 1):
            response = self._send(current, etag, last_modified, deadline)
            try:
                if response.status_code in _REDIRECTS:
                    current = self._redirect(current, response.headers.get("location", ""))
                    continue
                if response.status_code == 304:
                    return Page(current, 304, "", b"", etag, last_modified)
                if response.status_code in (404, 410):
                    raise FetchError("gone", str(response.status_code))
                if not 200 <= response.status_code < 300:
                    raise FetchError("http_status", str(response.status_code))
                media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                kind = READABLE.get(media)
                if kind is None or (accept is not None and kind not in accept):
                    raise FetchError("not_readable", media or "no Content-Type")
                data = read_capped(response, cap, deadline)
                return Page(current, 200, kind, data, response.headers.get("etag", ""),
                            response.headers.get("last-modified", ""))
            finally:
                response.close()
        raise FetchError("too_many_redirects", f"more than {MAX_REDIRECTS}")

    def _send(self, url: str, etag: str, last_modified: str, deadline: float) -> httpx.Response:
        """Send one GET to the checked address of the URL's host; the body still unread."""
        httpx = httpx_module()
        scheme, host, port, address = self.check(url)
        parts = urlsplit(url)
        pinned = f"[{address}]" if ":" in address else address
        target = urlunsplit((scheme, f"{pinned}:{port}", parts.path or "/", parts.query, ""))
        headers = {"Host": host if port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        left = deadline - time.monotonic()
        if left <= 0:
            raise FetchError("timeout", "deadline passed")
        request = self._client.build_request("GET", target, headers=headers, timeout=httpx.Timeout(min(left, 5.0)),
                                             extensions={"sni_hostname": host})
        try:
            return self._client.send(request, stream=True)
        except httpx.TimeoutException:
            raise FetchError("timeout", host) from None
        except transport_errors() as err:
            raise FetchError("unreachable", f"{host}: {type(err).__name__}") from None

    @staticmethod
    def _redirect(current: str, location: str) -> str:
        """Resolve a Location; refuse a downgrade from https (the next hop is checked again)."""
        if not location or any(c.isspace() for c in location):
            raise FetchError("bad_redirect", "an empty or odd Location")
        target = urljoin(current, location).split("#", 1)[0]
        scheme, _, _ = split_url(target)
        if urlsplit(current).scheme.lower() == "https" and scheme != "https":
            raise FetchError("bad_redirect", "https to http")
        return target


def read_capped(response: httpx.Response, cap: int, deadline: float) -> bytes:
    """Read a streamed response's body within its cap and the deadline (also the business
    tools' reader, bot/tools/caller.py)."""
    length = response.headers.get("content-length", "")
    if length.isdigit() and int(length) > cap:
        raise FetchError("too_large", f"Content-Length {length} over {cap}")
    if response.headers.get("content-encoding", "identity").strip().lower() not in ("", "identity"):
        raise FetchError("http_status", "a compressed body we did not ask for")
    body = bytearray()
    try:
        for chunk in response.iter_raw():
            body += chunk
            if len(body) > cap:
                raise FetchError("too_large", f"over {cap} bytes")
            if time.monotonic() > deadline:
                raise FetchError("timeout", f"{len(body)} bytes by the deadline")
    except transport_errors() as err:
        raise FetchError("unreachable", type(err).__name__) from None
    return bytes(body)
