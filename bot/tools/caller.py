"""Call one of the business's tools over HTTP, on its one origin (docs/tools.md).

- The URL is the tool book's base URL and the operation's path; the model's arguments only
  fill the path's placeholders (quoted), the query, and the JSON body.
- Arguments marked `x-bot-user` are always the caller's own number, whatever the model said.
- The credentials (TOOLS_AUTH_HEADER) go only to that origin; a redirect to another origin
  is never followed, and they are never logged.
- Each call has TOOLS_TIMEOUT_S; a body over TOOLS_MAX_RESPONSE_BYTES, or one that is not
  JSON, is refused unread or half read.
- A read is tried again once after a connection error or a 5xx; a write never is, and it
  carries an `Idempotency-Key`: the confirmed action's stable id.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote, urljoin

import structlog

from bot.knowledge.web_fetch import FetchError, httpx_module, read_capped, split_url, transport_errors
from bot.tools.openapi import ToolBook, ToolSpec

log = structlog.get_logger(__name__)

MAX_REDIRECTS = 3
USER_AGENT = "whatsapp-gpt-bot-tools/1"
#: Argument values longer than this are refused before any call (a model that loops on text).
MAX_ARGUMENT_CHARS = 2_000


@dataclass(frozen=True)
class ToolResult:
    """What one call came to: `outcome` is ok, http_error, refused, timeout, unreachable,
    too_large, not_json or bad_arguments; `data` is the JSON the API answered (ok and
    http_error), else None."""

    tool: str
    outcome: str
    status: int = 0
    data: Any = None
    detail: str = ""
    duration_s: float = 0.0
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def parse_auth_header(value: str | None) -> tuple[str, str] | None:
    """Return ("Authorization", "Bearer …") from TOOLS_AUTH_HEADER's "Name: value"."""
    if not value:
        return None
    name, sep, rest = value.partition(":")
    if not sep or not name.strip() or not rest.strip():
        raise ValueError("TOOLS_AUTH_HEADER must read 'Header-Name: value'")
    return name.strip(), rest.strip()


def arguments_for(tool: ToolSpec, given: dict[str, Any], user: str) -> dict[str, Any]:
    """Return the call's arguments: the model's, without any it may not give, and every
    x-bot-user one set to the caller's number (overwriting whatever the model put there)."""
    known = {a.name for a in tool.arguments}
    out = {k: v for k, v in given.items() if k in known}
    for argument in tool.user_arguments:
        out[argument.name] = user
    return out


class ToolCaller:
    """Sends tool calls to the business's API; one client (and its connections) per process."""

    def __init__(self, book: ToolBook, *, timeout_s: float = 5.0, max_bytes: int = 256 * 1024,
                 auth_header: str | None = None) -> None:
        self.book = book
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self._auth = parse_auth_header(auth_header)
        self._client: Any = None

    def _http(self) -> Any:
        if self._client is None:
            httpx = httpx_module()
            self._client = httpx.Client(follow_redirects=False, timeout=httpx.Timeout(self.timeout_s),
                                        headers={"User-Agent": USER_AGENT, "Accept": "application/json"})
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def request_parts(self, tool: ToolSpec, arguments: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, str], Any]:
        """Return (url, query, headers, json body) for a call; raise ValueError for
        arguments that cannot go in (a missing path value, a value too long)."""
        path = tool.path
        query: dict[str, Any] = {}
        headers: dict[str, str] = {}
        body: Any = None
        for argument in tool.arguments:
            if argument.name not in arguments:
                continue
            value = arguments[argument.name]
            if len(json.dumps(value, ensure_ascii=False, default=str)) > MAX_ARGUMENT_CHARS:
                raise ValueError(f"{argument.name} is too long")
            if argument.where == "path":
                path = path.replace("{" + argument.name + "}", quote(str(value), safe=""))
            elif argument.where == "query":
                query[argument.name] = value if isinstance(value, (str, int, float)) else json.dumps(value)
            elif argument.where == "header":
                headers[argument.name] = str(value).replace("\r", " ").replace("\n", " ")
            elif tool.body_whole:
                body = value
            else:
                body = {**(body or {}), argument.name: value}
        if "{" in path:
            raise ValueError(f"missing a value for {path[path.index('{'):path.index('}') + 1]}")
        if tool.method not in ("GET", "HEAD", "DELETE") and body is None and any(a.where == "body" for a in tool.arguments):
            body = {}
        return self.book.base_url + path, query, headers, body

    def call(self, tool: ToolSpec, arguments: dict[str, Any], user: str, idempotency_key: str | None = None,
             timeout_s: float | None = None) -> ToolResult:
        """Call the tool for this user and return what came of it, within timeout_s (at most
        TOOLS_TIMEOUT_S: what the turn has left); never raises for the API's failures (the
        model is told, and offers a person)."""
        started = time.monotonic()
        timeout = self.timeout_s if timeout_s is None else max(0.1, min(timeout_s, self.timeout_s))
        arguments = arguments_for(tool, arguments, user)
        try:
            url, query, headers, body = self.request_parts(tool, arguments)
        except ValueError as err:
            return ToolResult(tool.name, "bad_arguments", detail=str(err)[:200])
        if tool.write:
            if not idempotency_key:
                return ToolResult(tool.name, "refused", detail="a write needs its confirmed action's key")
            headers["Idempotency-Key"] = idempotency_key
        attempts = 1 if tool.write else 2  # a read once more after a connection error or a 5xx
        result = ToolResult(tool.name, "unreachable")
        for attempt in range(1, attempts + 1):
            result = replace(self._send(tool, url, query, headers, body, started, timeout),
                             duration_s=time.monotonic() - started, attempts=attempt)
            retry = result.outcome == "unreachable" or (result.outcome == "http_error" and result.status >= 500)
            if not retry or time.monotonic() - started > timeout:
                break
        log.info("tool.called", tool=tool.name, outcome=result.outcome, status=result.status,
                 duration_ms=round(result.duration_s * 1000, 1), attempts=result.attempts)
        return result

    def _send(self, tool: ToolSpec, url: str, query: dict[str, Any], headers: dict[str, str], body: Any,
              started: float, timeout_s: float) -> ToolResult:
        httpx = httpx_module()
        deadline = started + timeout_s
        method = tool.method
        for _hop in range(MAX_REDIRECTS + 1):
            sent = dict(headers)
            if self._auth and self._same_origin(url):  # the credentials never leave the origin
                sent[self._auth[0]] = self._auth[1]
            left = deadline - time.monotonic()
            if left <= 0:
                return ToolResult(tool.name, "timeout", detail="no time left")
            try:
                request = self._http().build_request(method, url, params=query or None, headers=sent,
                                                     json=body if body is not None else None,
                                                     timeout=httpx.Timeout(left))
                response = self._http().send(request, stream=True)
            except httpx.TimeoutException:
                return ToolResult(tool.name, "timeout", detail=f"over {timeout_s:g} s")
            except transport_errors() as err:
                return ToolResult(tool.name, "unreachable", detail=type(err).__name__)
            try:
                if response.status_code in (301, 302, 303, 307, 308):
                    target = urljoin(url, response.headers.get("location", ""))
                    if not self._same_origin(target):
                        return ToolResult(tool.name, "refused", response.status_code,
                                          detail="a redirect to another origin is never followed")
                    url, query = target, {}
                    if response.status_code == 303:
                        method, body = "GET", None
                    continue
                return self._read(tool, response, deadline)
            finally:
                response.close()
        return ToolResult(tool.name, "refused", detail="too many redirects")

    def _read(self, tool: ToolSpec, response: Any, deadline: float) -> ToolResult:
        status = response.status_code
        try:
            raw = read_capped(response, self.max_bytes, deadline)
        except FetchError as err:
            outcome = {"too_large": "too_large", "timeout": "timeout"}.get(err.reason, "unreachable")
            return ToolResult(tool.name, outcome, status, detail=err.detail[:200])
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        data: Any = None
        if raw.strip():
            if not (kind == "application/json" or kind.endswith("+json")):
                return ToolResult(tool.name, "not_json", status, detail=f"the API answered {kind or 'no type'}")
            try:
                data = json.loads(raw)
            except ValueError:
                return ToolResult(tool.name, "not_json", status, detail="the body is not valid JSON")
        if status >= 400:
            return ToolResult(tool.name, "http_error", status, data)
        return ToolResult(tool.name, "ok", status, data)

    def _same_origin(self, url: str) -> bool:
        """Whether url is on the tools' origin (a URL that cannot be read never is)."""
        try:
            return split_url(url) == split_url(self.book.base_url)
        except FetchError:
            return False


def fetch_document(url: str, *, timeout_s: float, auth_header: str | None = None,
                   max_bytes: int = 2_000_000) -> bytes:
    """Return the OpenAPI document at an http(s) URL (the operator's own, so a private
    address is fine); no redirect is followed, and the credentials go to that origin only."""
    from bot.tools.openapi import ToolsConfigError

    httpx = httpx_module()
    auth = parse_auth_header(auth_header)
    deadline = time.monotonic() + timeout_s
    try:
        with httpx.Client(follow_redirects=False, timeout=httpx.Timeout(timeout_s),
                          headers={"User-Agent": USER_AGENT, **({auth[0]: auth[1]} if auth else {})}) as client:
            with client.stream("GET", url) as response:
                if response.status_code != 200:
                    raise ToolsConfigError(f"TOOLS_OPENAPI: {url} answered {response.status_code}")
                return read_capped(response, max_bytes, deadline)
    except FetchError as err:
        raise ToolsConfigError(f"TOOLS_OPENAPI: {url}: {err}") from err
    except transport_errors() as err:
        raise ToolsConfigError(f"TOOLS_OPENAPI: {url} could not be read ({type(err).__name__})") from err
