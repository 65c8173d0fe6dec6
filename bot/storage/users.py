"""Every key of one user at once: erase, sizes and TTLs, and finding users."""

from __future__ import annotations

from typing import Any, Iterator

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import CONTEXT_PREFIX, FACTS_PREFIX, user_key, user_keys
from bot.storage.records import as_float, text


def erase_keys(client: redis.Redis, user: str) -> int:
    """Delete every key of this user, facts included; return how many existed."""
    try:
        return int(client.delete(*user_keys(user)))
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err


def key_report(client: redis.Redis, keys: list[str]) -> list[dict[str, Any]]:
    """Return name, type, bytes (MEMORY USAGE) and TTL seconds of each existing key."""
    try:
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.type(key)
                pipe.memory_usage(key, samples=0)  # every field: the default samples 5 and guesses
                pipe.ttl(key)
            raw = pipe.execute()
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    report = []
    for i, key in enumerate(keys):
        kind, size, ttl = (text(raw[3 * i]), raw[3 * i + 1], raw[3 * i + 2])
        if kind == "none":
            continue
        report.append({"key": key, "type": kind, "bytes": int(size or 0), "ttl_s": int(ttl)})
    return report


def scan_keyed_users(client: redis.Redis, prefix: str) -> Iterator[str]:
    """Yield every user with a `prefix{+E164}` key, with SCAN (every master of a cluster)."""
    for key in client.scan_iter(match=f"{prefix}*", count=500):
        yield text(key)[len(prefix) :].strip("{}")


def scan_fact_users(client: redis.Redis) -> Iterator[str]:
    """Yield every user with stored facts (their conversation may have expired), with SCAN."""
    return scan_keyed_users(client, FACTS_PREFIX)


def scan_users(client: redis.Redis) -> Iterator[tuple[str, float | None]]:
    """Yield (user, last interaction) for every user with stored context, found with SCAN."""
    for user in scan_keyed_users(client, CONTEXT_PREFIX):
        stamp = client.hget(user_key(CONTEXT_PREFIX, user), "last_interaction_timestamp")
        yield user, as_float(text(stamp), "last_interaction_timestamp")
