"""Model tokens per user, by purpose and model: what each user costs.

Key ``user_usage:{+E164}`` hash: ``<purpose>|<model>|in`` (prompt tokens), ``…|out``
(completion tokens) and ``…|calls``, and ``…|sec`` (seconds of audio, transcription only); purposes are reply, task,
summary, facts, entities, transcription.
The reply path adds its counts inside the commit script (no extra round trip); background
jobs add theirs here. Same TTL as the user's facts; in export, erased with the user.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterator, Protocol

import redis
import structlog

from bot.config.tasks import Price
from bot.exceptions import StoreUnavailable
from bot.storage.keys import CONTEXT_PREFIX, MEMORY_PREFIX, USAGE_PREFIX, user_key
from bot.storage.records import as_int, text
from bot.storage.scripts import Scripts
from bot.storage.users import scan_keyed_users

log = structlog.get_logger(__name__)


class DayCounter(Protocol):
    """Where a day's usage is counted too (bot/storage/activity.py ActivityStore)."""

    def record(self, now: float, answered: bool, usage: dict[str, int] | None = None) -> None:
        """Count one answered message and/or the usage of model calls."""


class ModelCall(Protocol):
    """What a model call reports (bot.llm.client.Completion has it)."""

    model: str
    prompt_tokens: int
    completion_tokens: int

#: The purposes kept apart (the model client's "extraction" is counted as "facts").
PURPOSES = ("reply", "task", "summary", "facts", "entities", "transcription")



def usage_fields(purpose: str, model: str, prompt_tokens: int, completion_tokens: int, seconds: int = 0) -> dict[str, int]:
    """Return the hash increments of one model call (seconds: of audio transcribed)."""
    base = f"{purpose}|{model.replace('|', '/')}"
    fields = {f"{base}|in": prompt_tokens, f"{base}|out": completion_tokens, f"{base}|calls": 1}
    if seconds:
        fields[f"{base}|sec"] = seconds
    return fields


@dataclass(frozen=True)
class Usage:
    """Tokens of one purpose on one model."""

    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    calls: int
    seconds: int = 0  # of audio transcribed

    def cost(self, prices: dict[str, Price]) -> float | None:
        """Return the cost in USD with the price table, or None when the model has no price."""
        price = prices.get(self.model)
        if price is None:  # the API names a snapshot ("gpt-4o-mini-2024-07-18"): its family's price
            family = max((name for name in prices if self.model.startswith(name + "-")), key=len, default=None)
            price = prices.get(family) if family else None
        if price is None:
            return None
        price = Price(*price)  # a plain (input, output) pair prices no audio
        tokens = (self.prompt_tokens * price.input + self.completion_tokens * price.output) / 1_000_000
        return tokens + self.seconds / 60 * price.per_minute


def decode_usage(raw: dict) -> list[Usage]:
    """Return the usage rows of a user's hash (bytes or str), sorted by purpose then model."""
    rows: dict[tuple[str, str], dict[str, int]] = {}
    for field, value in raw.items():
        parts = text(field).split("|")
        if len(parts) == 3:
            rows.setdefault((parts[0], parts[1]), {})[parts[2]] = as_int(text(value), "usage")
    return [Usage(p, m, c.get("in", 0), c.get("out", 0), c.get("calls", 0), c.get("sec", 0))
            for (p, m), c in sorted(rows.items())]


class UsageStore:
    """Add and read a user's model usage."""

    def __init__(self, client: redis.Redis, *, ttl_seconds: int = 0, activity: DayCounter | None = None) -> None:
        self.redis = client
        self.ttl_seconds = ttl_seconds
        self.activity = activity  # the day's usage for the console's overview, when given
        self.scripts = Scripts(client, "usage_add")

    def add(self, user: str, purpose: str, model: str, prompt_tokens: int, completion_tokens: int) -> bool:
        """Count one model call of a background job, unless the user was erased meanwhile;
        return whether it was counted."""
        keys = {"usage": user_key(USAGE_PREFIX, user), "context": user_key(CONTEXT_PREFIX, user),
                "memory": user_key(MEMORY_PREFIX, user)}
        fields = usage_fields(purpose, model, prompt_tokens, completion_tokens)
        return bool(self.scripts.run("usage_add", keys, {"fields": fields, "ttl": self.ttl_seconds}))

    def count_call(self, user: str, purpose: str, call: ModelCall | None) -> None:
        """Count a background model call (None: no call was made), for the user and in the
        day's activity; a Redis error only costs the count, logged."""
        if call is None:
            return
        try:
            counted = self.add(user, purpose, call.model, call.prompt_tokens, call.completion_tokens)
        except StoreUnavailable as err:
            log.warning("usage.not_counted", purpose=purpose, error=str(err))
            return
        if counted and self.activity is not None:
            fields = usage_fields(purpose, call.model, call.prompt_tokens, call.completion_tokens)
            try:
                self.activity.record(time.time(), answered=False, usage=fields)
            except StoreUnavailable as err:
                log.warning("activity.not_counted", purpose=purpose, error=str(err))

    def load(self, user: str) -> list[Usage]:
        """Return the user's usage rows."""
        try:
            return decode_usage(self.redis.hgetall(user_key(USAGE_PREFIX, user)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def users(self) -> Iterator[str]:
        """Yield every user with counted usage (SCAN, every master of a cluster)."""
        return scan_keyed_users(self.redis, USAGE_PREFIX)
