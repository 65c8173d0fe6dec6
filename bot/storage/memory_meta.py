"""A user's memory settings and counters.

Key ``user_memory:{+E164}`` hash: ``opted_out``; ``extracted_seq`` (last pair number read
by fact extraction); ``extract_job_at`` / ``extract_job_token`` (the extraction trigger,
bot/storage/triggers.py); ``erase_requested_at``; ``stat_<name>`` counters (STAT_FIELDS).
"""

from __future__ import annotations

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import MEMORY_PREFIX, user_key
from bot.storage.records import as_int, text

#: The user_memory field that turns the task call off for one user ("1").
TASK_OFF_FIELD = "task_off"
#: Counters kept per user in user_memory:{+E164} as stat_<name>.
STAT_FIELDS = ("extracted", "stored", "rejected_low_confidence", "conflicts", "duplicates", "pruned")


class MemoryMetaStore:
    """Read and write the user_memory hash."""

    def __init__(self, client: redis.Redis, *, ttl_seconds: int = 0) -> None:
        self.redis = client
        self.ttl_seconds = ttl_seconds

    def meta(self, user: str) -> dict[str, str]:
        """Return the user's memory settings and counters."""
        try:
            return {text(k): text(v) for k, v in self.redis.hgetall(user_key(MEMORY_PREFIX, user)).items()}
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def stats(self, user: str) -> dict[str, int]:
        """Return the user's extraction counters."""
        meta = self.meta(user)
        return {name: as_int(meta.get(f"stat_{name}"), f"stat_{name}") for name in STAT_FIELDS}

    def set_meta(self, user: str, **fields: str | None) -> None:
        """Set (or with None, remove) memory settings such as opted_out."""
        key = user_key(MEMORY_PREFIX, user)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                present = {k: v for k, v in fields.items() if v is not None}
                absent = [k for k, v in fields.items() if v is None]
                if present:
                    pipe.hset(key, mapping=present)
                if absent:
                    pipe.hdel(key, *absent)
                if self.ttl_seconds:
                    pipe.expire(key, self.ttl_seconds)
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
