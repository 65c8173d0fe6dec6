"""Optimistic writes: WATCH the keys, read, decide, MULTI … EXEC; again when another writer
changed a watched key first. The facts and the entity stores write this way, each under the
job trigger it holds."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.records import text

#: Attempts before giving up: another writer won each race.
WATCH_RETRIES = 8

T = TypeVar("T")


def watched(client: Any, keys: tuple[str, ...], attempt: Callable[[Any], T], what: str) -> T:
    """Return attempt(pipe), run with `keys` watched, again after a race (WatchError);
    raise StoreUnavailable on a Redis error or after WATCH_RETRIES races (`what` names the
    data in that message)."""
    for _ in range(WATCH_RETRIES):
        try:
            with client.pipeline(transaction=True) as pipe:
                pipe.watch(*keys)
                return attempt(pipe)
        except redis.WatchError:
            continue
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
    raise StoreUnavailable(f"{what} kept changing; gave up after {WATCH_RETRIES} tries")


def holds_write(pipe: Any, memory_key: str, job: str, token: str) -> bool:
    """Return whether the job with `token` still holds its trigger and the user has not
    opted out (read inside the WATCH): an erase or an opt-out while the model was thinking
    wins over the job's write."""
    return text(pipe.hget(memory_key, f"{job}_token")) == token and text(pipe.hget(memory_key, "opted_out")) != "1"
