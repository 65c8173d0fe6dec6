"""The users as operators find them: the console's list (newest activity first, searched by
digits, a page at a time), the active-user counts, and rebuilding the index.

Everything is read from the users index (bot/storage/user_index.py): a page is one range read
per bucket plus one pipeline for its columns, whatever the number of users.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import redis
import structlog

from bot.config.tasks import Price
from bot.exceptions import StoreUnavailable
from bot.storage.user_index import UserIndex
from bot.storage.user_rows import UserRow, read_rows
from bot.storage.users import scan_users
from bot.users.data import UserData

log = structlog.get_logger(__name__)

#: Users on one page of the list.
PAGE_SIZE = 50
#: The active-user windows of the overview, in seconds.
ACTIVE_WINDOWS = {"hour": 3600.0, "day": 86400.0}


@dataclass(frozen=True)
class Page:
    """One page of the users list."""

    rows: list[UserRow]
    number: int
    pages: int
    total: int


def digits(query: str) -> str:
    """Return the digits of a search, so "+1 (415) 555" finds +1415555…"""
    return re.sub(r"\D", "", query)


def users_page(data: UserData, query: str, number: int, now: float | None = None) -> Page:
    """Return page `number` (from 1) of the users, newest activity first; a query keeps the
    numbers that hold its digits."""
    index = _index(data)
    now = time.time() if now is None else now
    wanted = digits(query)
    if wanted:
        found = index.search(wanted, now)
        pages = max(1, -(-len(found) // PAGE_SIZE))
        number = min(max(number, 1), pages)
        chosen, total = found[(number - 1) * PAGE_SIZE : number * PAGE_SIZE], len(found)
    else:
        listed = index.page((max(number, 1) - 1) * PAGE_SIZE, PAGE_SIZE, now)
        pages = max(1, -(-listed.total // PAGE_SIZE))
        if not 1 <= number <= pages:  # past the end (users left since): the nearest page
            number = min(max(number, 1), pages)
            listed = index.page((number - 1) * PAGE_SIZE, PAGE_SIZE, now)
        chosen, total = listed.users, listed.total
    return Page(read_rows(data.redis, list(chosen)), number, pages, total)


def row_cost(row: UserRow, prices: dict[str, Price]) -> float | None:
    """Return what a user's model calls cost, or None when one model has no price."""
    return total_cost(row.usage, prices)


def total_cost(rows: list[Any], prices: dict[str, Price]) -> float | None:
    """Return the cost of these usage rows, or None when one has no price (nothing to price: 0)."""
    costs = [row.cost(prices) for row in rows]
    return None if any(c is None for c in costs) else sum(costs)


def active_users(data: UserData, now: float) -> dict[str, int]:
    """Return how many users wrote in the last hour and day, and how many are stored."""
    return _index(data).counts(now, ACTIVE_WINDOWS)


def reindex(data: UserData) -> int:
    """Add every user with a conversation to the index, from a SCAN of their keys (for a
    deployment that stored users before the index); return how many."""
    try:
        found = list(scan_users(data.redis))
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    added = _index(data).add_many((user, last or time.time()) for user, last in found)
    log.info("users.reindexed", users=added)
    return added


def _index(data: UserData) -> UserIndex:
    if data.index is None:
        raise RuntimeError("these services were built without the users index")
    return data.index
