"""The business's tools, read from its OpenAPI document (docs/tools.md).

Every operation with an `operationId` becomes one tool of the same name: its description is
the operation's summary and description, its JSON Schema the operation's parameters and JSON
request body, `$ref`s resolved. `openapi-spec-validator` checks the document (OpenAPI 3.0 and
3.1) and `referencing`, jsonschema's own reference library, resolves its references, so we
parse no OpenAPI ourselves beyond walking the validated operations.

- A parameter or body property marked `x-bot-user: true` is the caller's WhatsApp number: it
  is left out of what the model sees, and the bot fills it in (bot/tools/caller.py).
- GET and HEAD are reads; any other method is a write, which waits for the user's yes,
  unless the operation says `x-bot-confirm: false`.
- The `Idempotency-Key` and `Authorization` headers are the bot's, never the model's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.exceptions import BotError

#: The methods that only read; every other one is a write.
READ_METHODS = frozenset({"get", "head"})
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
#: What the model may call a function (the Chat Completions API's rule for tool names).
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: Headers the bot sets itself; an operation's parameter of that name is not the model's.
BOT_HEADERS = frozenset({"idempotency-key", "authorization", "cookie", "content-type", "content-length", "host"})
#: How deep a `$ref` may nest inside another before it is left as an open object (a schema
#: that refers to itself, a tree of categories say, would otherwise never end).
MAX_REF_DEPTH = 8
#: The most characters of a tool's description the model is given.
MAX_DESCRIPTION = 600
#: The largest document read (a file or a URL).
MAX_DOCUMENT_BYTES = 2_000_000


class ToolsConfigError(BotError):
    """The OpenAPI document could not be read or is not a valid OpenAPI 3.0/3.1 document."""


@dataclass(frozen=True)
class Argument:
    """Where one of a tool's arguments goes in the HTTP request."""

    name: str
    where: str  # path, query, header or body
    user: bool = False  # x-bot-user: the caller's number, filled by the bot


@dataclass(frozen=True)
class ToolSpec:
    """One operation of the business's API, as a tool the reply model may call."""

    name: str
    method: str  # upper case
    path: str  # the document's path template, /appointments/{appointment_id}
    summary: str
    description: str
    parameters: dict[str, Any]  # the JSON Schema the model sees: no x-bot-user field
    arguments: tuple[Argument, ...]
    write: bool  # a write: sent only after the user's yes
    confirm: bool  # a write that asks first (all of them unless x-bot-confirm: false)
    body_whole: bool = False  # the JSON body is not an object: the model gives it as "body"

    @property
    def user_arguments(self) -> tuple[Argument, ...]:
        """Return the arguments the bot fills with the caller's number."""
        return tuple(a for a in self.arguments if a.user)

    def for_model(self) -> dict[str, Any]:
        """Return the tool as the Chat Completions API takes it."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


@dataclass(frozen=True)
class ToolBook:
    """The business's tools and the one origin they are called on."""

    base_url: str
    tools: dict[str, ToolSpec]
    title: str = ""
    skipped: tuple[str, ...] = field(default_factory=tuple)  # operations left out, and why


def read_document(source: str, fetch: Any = None) -> dict[str, Any]:
    """Return the OpenAPI document at a file path or an http(s) URL (JSON or YAML).

    `fetch(url) -> bytes` reads a URL (bot/tools/caller.py's, capped and with a timeout).
    """
    if source.startswith(("http://", "https://")):
        if fetch is None:
            raise ToolsConfigError("an OpenAPI URL needs a fetcher")
        raw = fetch(source)
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise ToolsConfigError(f"TOOLS_OPENAPI: no file at {source}")
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise ToolsConfigError(f"TOOLS_OPENAPI: {source} is over {MAX_DOCUMENT_BYTES} bytes")
        raw = path.read_bytes()
    return parse_document(raw, source)


def parse_document(raw: bytes, source: str = "the document") -> dict[str, Any]:
    """Return the document's mapping from JSON or YAML bytes."""
    text = raw.decode("utf-8", errors="replace")
    try:
        document = json.loads(text)
    except ValueError:
        import yaml

        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as err:
            raise ToolsConfigError(f"{source} is neither JSON nor YAML: {str(err)[:200]}") from err
    if not isinstance(document, dict):
        raise ToolsConfigError(f"{source} is not an OpenAPI document (not a mapping)")
    return document


def validate(document: dict[str, Any]) -> None:
    """Raise ToolsConfigError unless the document is a valid OpenAPI 3.0 or 3.1 document."""
    from openapi_spec_validator import validate as check

    version = str(document.get("openapi", ""))
    if not version.startswith(("3.0", "3.1")):
        raise ToolsConfigError(f"only OpenAPI 3.0 and 3.1 documents are read (this one says {version or 'nothing'})")
    try:
        check(document)
    except Exception as err:  # the validator's own error types, by version
        raise ToolsConfigError(f"the OpenAPI document is not valid: {str(err).splitlines()[0][:300]}") from err


class _Refs:
    """The document's `$ref`s, resolved with `referencing` (JSON pointers into the document)."""

    def __init__(self, document: dict[str, Any]) -> None:
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        uri = "urn:bot:openapi"
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        self._resolver = Registry().with_resource(uri, resource).resolver(base_uri=uri)

    def lookup(self, ref: str) -> Any:
        try:
            return self._resolver.lookup(ref).contents
        except Exception as err:  # referencing's Unresolvable and its kin
            raise ToolsConfigError(f"cannot resolve $ref {ref!r}") from err

    def inline(self, node: Any, depth: int = 0) -> Any:
        """Return node with every local `$ref` replaced by what it points at."""
        if isinstance(node, list):
            return [self.inline(item, depth) for item in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("$ref"), str):
            if depth >= MAX_REF_DEPTH:
                return {"type": "object"}
            target = self.inline(self.lookup(node["$ref"]), depth + 1)
            siblings = {k: self.inline(v, depth) for k, v in node.items() if k != "$ref"}
            return {**target, **siblings} if isinstance(target, dict) else target
        return {k: self.inline(v, depth) for k, v in node.items()}


def _for_model(schema: dict[str, Any]) -> dict[str, Any]:
    """Return a parameter's schema without what only the bot reads (x-* extensions)."""
    if isinstance(schema, dict):
        return {k: _for_model(v) for k, v in schema.items() if not k.startswith("x-")}
    if isinstance(schema, list):
        return [_for_model(v) for v in schema]  # type: ignore[return-value]
    return schema


def _operation_tool(path: str, method: str, operation: dict[str, Any],
                    shared: list[dict[str, Any]]) -> ToolSpec | str:
    """Return the operation's tool, or why it is left out (its path item's `$ref`s already
    resolved)."""
    name = operation.get("operationId")
    if not isinstance(name, str) or not name:
        return f"{method.upper()} {path}: no operationId"
    if not TOOL_NAME.match(name):
        return f"{name}: an operationId must be letters, digits, _ or - (64 at most) to be a tool's name"
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: list[Argument] = []
    by_key = {(p.get("name"), p.get("in")): p for p in [*shared, *operation.get("parameters", [])]}
    for (pname, where), param in by_key.items():
        if not isinstance(pname, str) or where not in ("path", "query", "header"):
            continue  # cookies are never sent
        if where == "header" and pname.lower() in BOT_HEADERS:
            continue
        user = param.get("x-bot-user") is True
        arguments.append(Argument(pname, where, user))
        if user:
            continue
        schema = _for_model(param.get("schema") or {"type": "string"})
        if param.get("description") and "description" not in schema:
            schema["description"] = param["description"]
        properties[pname] = schema
        if param.get("required") or where == "path":
            required.append(pname)
    body_whole = False
    body = operation.get("requestBody") or {}
    content = body.get("content") or {}
    media = next((v for k, v in content.items() if k.split(";")[0].strip() in ("application/json", "*/*")
                  or k.endswith("+json")), None)
    if body and media is None and content:
        return f"{name}: only JSON request bodies are sent"
    if media is not None:
        schema = media.get("schema") or {"type": "object"}
        if schema.get("type", "object") == "object" and isinstance(schema.get("properties"), dict):
            # a property the body requires is the model's to give only when the body is required
            body_required = set(schema.get("required", [])) if body.get("required", False) else set()
            for prop, prop_schema in schema["properties"].items():
                user = isinstance(prop_schema, dict) and prop_schema.get("x-bot-user") is True
                arguments.append(Argument(prop, "body", user))
                if user:
                    continue
                properties[prop] = _for_model(prop_schema)
                if prop in body_required:
                    required.append(prop)
        else:
            body_whole = True
            arguments.append(Argument("body", "body"))
            properties["body"] = _for_model(schema)
            if body.get("required", False):
                required.append("body")
    summary = str(operation.get("summary") or "").strip()
    described = str(operation.get("description") or "").strip()
    description = (summary + (". " if summary and described else "") + described)[:MAX_DESCRIPTION] or name
    write = method not in READ_METHODS
    return ToolSpec(
        name=name, method=method.upper(), path=path, summary=summary or name, description=description,
        parameters={"type": "object", "properties": properties, "required": sorted(set(required)),
                    "additionalProperties": False},
        arguments=tuple(arguments), write=write, confirm=write and operation.get("x-bot-confirm") is not False,
        body_whole=body_whole,
    )


def tool_book(document: dict[str, Any], base_url: str | None = None) -> ToolBook:
    """Return the document's tools; raise ToolsConfigError if it is not a valid document
    or names no origin (`servers[0].url`, or `base_url`: TOOLS_BASE_URL)."""
    validate(document)
    refs = _Refs(document)  # inline() builds new mappings: the document is never changed
    servers = document.get("servers") or []
    url = base_url or (servers[0].get("url") if servers and isinstance(servers[0], dict) else None)
    if not url or not str(url).startswith(("http://", "https://")):
        raise ToolsConfigError("the tools' base URL must be an absolute http(s) URL: set servers[0].url "
                               "in the document, or TOOLS_BASE_URL")
    tools: dict[str, ToolSpec] = {}
    skipped: list[str] = []
    for path, item in (document.get("paths") or {}).items():
        item = refs.inline(item) if isinstance(item, dict) else {}
        shared = item.get("parameters", [])
        for method in METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            tool = _operation_tool(path, method, operation, shared)
            if isinstance(tool, str):
                skipped.append(tool)
            elif tool.name in tools:
                skipped.append(f"{tool.name}: the operationId is used twice")
            else:
                tools[tool.name] = tool
    title = str((document.get("info") or {}).get("title") or "")
    return ToolBook(base_url=str(url).rstrip("/"), tools=tools, title=title, skipped=tuple(skipped))
