"""`whatsapp-bot tools`: the business's tools as the bot reads them from TOOLS_OPENAPI
(docs/tools.md). Neither action calls the API; `list` reads each tool's health from the
recent calls in Redis when it can, and says so when it cannot."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable


def main(args: argparse.Namespace) -> int:
    """Read the document (TOOLS_OPENAPI, or --openapi) and list or check its tools; exit 2
    when it cannot be read or is not valid, 1 when it is valid but holds no tool."""
    from bot.config import load_settings
    from bot.exceptions import ConfigError
    from bot.tools import load_tool_book
    from bot.tools.openapi import ToolsConfigError

    try:
        overrides = {"TOOLS_OPENAPI": args.openapi} if args.openapi else {}
        settings = load_settings(need=(), **overrides)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    if not settings.TOOLS_OPENAPI:
        print("no tools: TOOLS_OPENAPI is not set (docs/tools.md)")
        return 1
    try:
        book = load_tool_book(settings)
    except ToolsConfigError as err:
        print(f"invalid: {err}", file=sys.stderr)
        return 2
    assert book is not None
    if args.json:
        print(json.dumps(book_report(book), indent=2, ensure_ascii=False))
        return 0 if book.tools else 1
    title = f" ({book.title})" if book.title else ""
    print(f"valid: {len(book.tools)} tool(s) on {book.base_url}{title}")
    if args.action == "list":
        health = tool_health(settings, book)
        if health is None:
            print("  (health unknown: Redis, where the recent calls are kept, did not answer)")
        for tool in book.tools.values():
            kind = "write, asks first" if tool.confirm else "write, no confirmation" if tool.write else "read"
            caller = ", ".join(a.name for a in tool.user_arguments)
            print(f"  {tool.name:28} {kind:22} {tool.method} {tool.path}" + (f"  (caller's number: {caller})" if caller else ""))
            print(f"  {'':28} {tool.summary}" + (f"  [{health[tool.name]}]" if health else ""))
    for why in book.skipped:
        print(f"  left out: {why}")
    return 0 if book.tools else 1


def tool_health(settings: Any, book: Any) -> dict[str, str] | None:
    """Return each tool's health from the recent calls (bot/users/tools.py), or None when
    Redis cannot be read."""
    import redis

    from bot.exceptions import BotError
    from bot.services import redis_clients, ttls_from
    from bot.storage.actions import ActionStore
    from bot.storage.user_index import UserIndex
    from bot.users.tools import recent_calls, tool_rows

    if "REDIS_URL" not in settings.model_fields_set:
        return None  # no Redis named: never guess one
    try:
        client, _queue = redis_clients(settings)
        index = (UserIndex.for_cluster if isinstance(client, redis.RedisCluster) else UserIndex)(
            client, keep_s=ttls_from(settings).context)
        actions = ActionStore(client, confirm_ttl_s=settings.TOOLS_CONFIRM_TTL_S, log_ttl_s=0)
        return {row.name: row.health for row in tool_rows(book, recent_calls(actions, index))}
    except (redis.RedisError, BotError, OSError):
        return None


def book_report(book: Any) -> dict[str, Any]:
    """Return the tools as `tools list --json` prints them."""
    return {
        "base_url": book.base_url, "title": book.title, "skipped": list(book.skipped),
        "tools": [{"name": t.name, "method": t.method, "path": t.path, "summary": t.summary, "write": t.write,
                   "confirm": t.confirm, "user_arguments": [a.name for a in t.user_arguments],
                   "parameters": t.parameters} for t in book.tools.values()],
    }


def add_parsers(sub: Any, e164: Callable[[str], str]) -> None:
    """Add `tools list` and `tools check`."""
    tools = sub.add_parser("tools", help="the business's tools from TOOLS_OPENAPI: list them, or check the document")
    actions = tools.add_subparsers(dest="action", required=True)
    for name, text in (("list", "list the tools: reads and writes, and where the caller's number goes"),
                       ("check", "validate the OpenAPI document (calls nothing)")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--openapi", help="a document to read instead of TOOLS_OPENAPI (a file or a URL)")
        action.add_argument("--json", action="store_true")
    tools.set_defaults(func=None)
