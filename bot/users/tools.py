"""What the console's Tools page shows (docs/tools.md): the business's tools with their
health, read from the calls themselves, and the recent calls of the most recent users. The
calls live in each user's own log (erased with them); nothing else keeps them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from bot.storage.actions import ActionStore
from bot.storage.user_index import UserIndex

#: The most recent users whose calls the page reads, and at most this many calls each.
RECENT_USERS = 50
CALLS_PER_USER = 5
#: Failed outcomes in a row (newest first) after which a tool is shown as failing.
FAILING_AFTER = 3
#: Outcomes that mean the API answered as an API should (a 4xx is the API working).
WORKING = frozenset({"ok", "http_error", "proposed", "bad_arguments"})


@dataclass
class ToolRow:
    """One tool as the page shows it."""

    name: str
    summary: str
    method: str
    path: str
    write: bool
    confirm: bool
    health: str = "no calls yet"  # healthy, failing, no calls yet
    calls: int = 0
    failed: int = 0
    last_at: float | None = None
    last_outcome: str = ""
    slowest_ms: int = 0
    recent: list[dict[str, Any]] = field(default_factory=list)


def recent_calls(actions: ActionStore | None, index: UserIndex | None, now: float | None = None) -> list[dict[str, Any]]:
    """Return the last calls of the RECENT_USERS most recent users, newest first, each with its user."""
    if actions is None or index is None:
        return []
    listed = index.page(0, RECENT_USERS, now or time.time())
    calls = [{**call, "user": user} for user, _ in listed.users for call in actions.calls(user)[:CALLS_PER_USER]]
    return sorted(calls, key=lambda c: -(c.get("at") or 0))


def tool_rows(book: Any, calls: list[dict[str, Any]]) -> list[ToolRow]:
    """Return every tool of the book with its health, from the calls (newest first)."""
    rows = []
    for spec in book.tools.values():
        row = ToolRow(spec.name, spec.summary or spec.description, spec.method, spec.path, spec.write, spec.confirm)
        mine = [c for c in calls if c.get("tool") == spec.name]
        row.calls, row.recent = len(mine), mine[:10]
        row.failed = sum(1 for c in mine if c.get("outcome") not in WORKING)
        if mine:
            row.last_at, row.last_outcome = mine[0].get("at"), str(mine[0].get("outcome", ""))
            row.slowest_ms = max(int(c.get("ms") or 0) for c in mine)
            streak = next((i for i, c in enumerate(mine) if c.get("outcome") in WORKING), len(mine))
            row.health = "failing" if streak >= min(FAILING_AFTER, len(mine)) and streak else "healthy"
        rows.append(row)
    return rows
