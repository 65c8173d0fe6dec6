"""The columns of the console's users list, for one page of users, read in one pipeline (a
cluster client splits it by node): a page of 50 users costs one round trip per node."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from bot.exceptions import StoreUnavailable
from bot.storage import packed_facts
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
from bot.storage.memory_meta import TASK_OFF_FIELD
from bot.storage.records import decode_pairs, text
from bot.storage.usage import Usage, decode_usage


@dataclass(frozen=True)
class UserRow:
    """One line of the users list."""

    user: str
    last_interaction: float | None
    pairs: int  # stored verbatim: the recent window and the pending pairs
    facts: int  # user and session scope
    usage: list[Usage]  # the model calls counted for the user, by purpose and model
    opted_out: bool
    task_off: bool
    handed_over: bool


def read_rows(client: redis.Redis, users: list[tuple[str, float | None]]) -> list[UserRow]:
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
            usage=decode_usage(usage),
            opted_out=text(flags[0]) == "1",
            task_off=text(flags[1]) == "1",
            handed_over=bool(handover),
        ))
    return rows
