"""The console overview's counters: messages answered per hour and model usage per day.

Keys (bot/storage/keys.py, ACTIVITY_PREFIX; TTL rule "activity", ACTIVITY_KEEP_DAYS):
``activity:answered:<YYYYMMDDHH>`` string, the messages answered in that hour (UTC);
``activity:usage:<YYYYMMDD>`` hash, the model usage of that day (UTC) in the fields of
``user_usage`` (bot/storage/usage.py). Not per user: they survive an erase and hold no number.
"""

from __future__ import annotations

from datetime import date, datetime, timezone

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import ACTIVITY_PREFIX
from bot.storage.records import as_int
from bot.storage.usage import Usage, decode_usage

HOUR_S = 3600


def answered_key(ts: float) -> str:
    """Return the counter of the hour (UTC) holding this Unix time."""
    return f"{ACTIVITY_PREFIX}answered:{datetime.fromtimestamp(ts, timezone.utc):%Y%m%d%H}"


def failed_key(ts: float) -> str:
    """Return the hash of the hour (UTC) counting failed deliveries by Twilio's error code."""
    return f"{ACTIVITY_PREFIX}failed:{datetime.fromtimestamp(ts, timezone.utc):%Y%m%d%H}"


def usage_key(day: date) -> str:
    """Return the usage hash of this day (a date, or a datetime taken as its UTC day)."""
    if isinstance(day, datetime):
        day = day.astimezone(timezone.utc) if day.tzinfo else day
    return f"{ACTIVITY_PREFIX}usage:{day:%Y%m%d}"


class ActivityStore:
    """Count what the bot does, for the console's overview."""

    def __init__(self, client: redis.Redis, *, keep_days: int) -> None:
        self.redis = client
        self.ttl_seconds = keep_days * 86400

    def record(self, now: float, answered: bool, usage: dict[str, int] | None = None) -> None:
        """Count one answered message and/or the usage of model calls, in one round trip."""
        if not answered and not usage:
            return
        try:
            with self.redis.pipeline(transaction=False) as pipe:  # the keys live in different slots
                if answered:
                    key = answered_key(now)
                    pipe.incr(key)
                    pipe.expire(key, self.ttl_seconds)
                if usage:
                    key = usage_key(datetime.fromtimestamp(now, timezone.utc))
                    for field, n in usage.items():
                        pipe.hincrby(key, field, n)
                    pipe.expire(key, self.ttl_seconds)
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def delivery_failed(self, now: float, code: str) -> None:
        """Count one message that did not arrive, by Twilio's error code (docs/window.md)."""
        key = failed_key(now)
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                pipe.hincrby(key, code or "none", 1)
                pipe.expire(key, self.ttl_seconds)
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def deliveries_failed(self, hours: int, now: float) -> dict[str, int]:
        """Return the failed deliveries of the last `hours` hours, by error code."""
        current = now - now % HOUR_S
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                for i in range(hours):
                    pipe.hgetall(failed_key(current - HOUR_S * i))
                hourly = pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        totals: dict[str, int] = {}
        for counts in hourly:
            for code, n in counts.items():
                code = code.decode() if isinstance(code, bytes) else str(code)
                totals[code] = totals.get(code, 0) + as_int(n, "activity.failed")
        return totals

    def answered(self, hours: int, now: float) -> list[tuple[float, int]]:
        """Return (hour start, messages answered) for the last `hours` hours, oldest first,
        the current hour last."""
        current = now - now % HOUR_S
        starts = [current - HOUR_S * i for i in range(hours - 1, -1, -1)]
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                for start in starts:
                    pipe.get(answered_key(start))
                counts = pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return [(start, as_int(count, "activity.answered")) for start, count in zip(starts, counts)]

    def usage_on(self, day: date) -> list[Usage]:
        """Return the model usage of one day (UTC), by purpose and model."""
        try:
            return decode_usage(self.redis.hgetall(usage_key(day)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
