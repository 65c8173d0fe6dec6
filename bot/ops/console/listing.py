"""The users list: every user found with SCAN, newest activity first, one page at a time.

Finding users is one SCAN of chat_context (every master of a cluster, bot/storage/users.py);
the columns of one page are read in one pipeline (a cluster client splits it by node), so a
page of 50 users costs one round trip per node, not 350.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import redis

from bot.config.tasks import Price
from bot.exceptions import StoreUnavailable
from bot.storage.keys import (
    CONTEXT_PREFIX,
    FACTS_PREFIX,
    HANDOVER_PREFIX,
    MEMORY_PREFIX,
    PENDING_PREFIX,
    SESSION_FACTS_PREFIX,
    USAGE_PREFIX,
    user_key,
)
from bot.storage import packed_facts
from bot.storage.memory_meta import TASK_OFF_FIELD
from bot.storage.records import decode_pairs, text
from bot.storage.usage import decode_usage
from bot.storage.users import scan_users

#: Users on one page of the list.
PAGE_SIZE = 50


@dataclass(frozen=True)
class UserRow:
    """One line of the users list."""

    user: str
    last_interaction: float | None
    pairs: int  # stored verbatim: the recent window and the pending pairs
    facts: int  # user and session scope
    cost: float | None  # None: a model without a price in MODEL_PRICES
    opted_out: bool
    task_off: bool
    handed_over: bool


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


def find_users(client: redis.Redis, query: str = "") -> list[tuple[str, float | None]]:
    """Return (user, last interaction) of every user whose number holds the searched digits,
    newest activity first."""
    wanted = digits(query)
    try:
        found = [(u, last) for u, last in scan_users(client) if not wanted or wanted in u]
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    return sorted(found, key=lambda item: (item[1] or 0, item[0]), reverse=True)


def users_page(client: redis.Redis, query: str, number: int, prices: dict[str, Price]) -> Page:
    """Return page `number` (from 1) of the users list."""
    found = find_users(client, query)
    pages = max(1, -(-len(found) // PAGE_SIZE))
    number = min(max(number, 1), pages)
    chosen = found[(number - 1) * PAGE_SIZE : number * PAGE_SIZE]
    return Page(read_rows(client, chosen, prices), number, pages, len(found))


def read_rows(client: redis.Redis, users: list[tuple[str, float | None]], prices: dict[str, Price]) -> list[UserRow]:
    """Read the columns of these users in one pipeline."""
    try:
        with client.pipeline(transaction=False) as pipe:
            for user, _ in users:
                pipe.hget(user_key(CONTEXT_PREFIX, user), "recent_messages")
                pipe.llen(user_key(PENDING_PREFIX, user))
                pipe.get(user_key(FACTS_PREFIX, user))  # packed, or...
                pipe.hlen(user_key(FACTS_PREFIX, user))  # ...stored before (bot/storage/packed_facts.py)
                pipe.hlen(user_key(SESSION_FACTS_PREFIX, user))
                pipe.hmget(user_key(MEMORY_PREFIX, user), ["opted_out", TASK_OFF_FIELD])
                pipe.hgetall(user_key(USAGE_PREFIX, user))
                pipe.exists(user_key(HANDOVER_PREFIX, user))
            raw = pipe.execute(raise_on_error=False)  # WRONGTYPE from one of the two
            failed = next((r for r in raw if isinstance(r, redis.RedisError) and not packed_facts.is_wrong_type(r)), None)
            if failed is not None:
                raise failed
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    rows = []
    for i, (user, last) in enumerate(users):
        recent, pending, packed, facts, session, flags, usage, handover = raw[8 * i : 8 * i + 8]
        rows.append(UserRow(
            user=user,
            last_interaction=last,
            pairs=len(decode_pairs(text(recent))) + int(pending),
            facts=packed_facts.count(packed, facts) + int(session),
            cost=total_cost(decode_usage(usage), prices),
            opted_out=text(flags[0]) == "1",
            task_off=text(flags[1]) == "1",
            handed_over=bool(handover),
        ))
    return rows


def total_cost(rows: list[Any], prices: dict[str, Price]) -> float | None:
    """Return the cost of these usage rows, or None when one has no price (nothing to price: 0)."""
    costs = [row.cost(prices) for row in rows]
    return None if any(c is None for c in costs) else sum(costs)
