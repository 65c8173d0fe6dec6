"""WhatsApp's 24-hour window per user, and the messages held while it is closed (docs/window.md).

Keys: ``chat_window:{+E164}``, a string: the Unix seconds of the user's last message, with a
TTL of `WHATSAPP_WINDOW_S` from it, so the window is open exactly while the key lives.
``chat_held:{+E164}``, a list, oldest first, of JSON ``{text, from, at, kind}``: what the bot or
a person wanted to send while the window was closed; taken whole, once, when the user writes
again. Both are the user's (inspected, exported, erased with them).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import CONTEXT_PREFIX, HELD_PREFIX, MEMORY_PREFIX, WINDOW_PREFIX, user_key
from bot.storage.records import json_object, take_list

#: The user_memory field set while the user has sent STOP (bot/users/lifecycle.py set_messages_off).
MESSAGES_OFF_FIELD = "messages_off_at"

#: Messages held per user at most; past it the oldest give way (a user away for weeks).
HELD_MAX = 20


@dataclass(frozen=True)
class Window:
    """A user's window: open or not, their last message and when the window closes."""

    open: bool
    last_inbound: float | None
    closes_at: float | None
    messages_off: bool = False  # the user sent STOP: the business writes first never


class WindowStore:
    """When each user last wrote, and what waits for them while their window is closed."""

    def __init__(self, client: redis.Redis, window_s: int, held_ttl_s: int) -> None:
        self.redis = client
        self.window_s = window_s  # WHATSAPP_WINDOW_S
        self.held_ttl_s = held_ttl_s  # the context's TTL rule (0: none)

    def opened(self, user: str, at: float | None = None) -> int:
        """Record a message from the user: their window is open for WHATSAPP_WINDOW_S from now;
        return how many messages are held for them (in the same round trip)."""
        at = time.time() if at is None else at
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                pipe.set(user_key(WINDOW_PREFIX, user), f"{at:.3f}", ex=self.window_s)
                pipe.llen(user_key(HELD_PREFIX, user))
                return int(pipe.execute()[-1])
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def closed(self, user: str) -> None:
        """Record that WhatsApp says the window is closed (a 63016): closed until the user writes."""
        try:
            self.redis.set(user_key(WINDOW_PREFIX, user), "0", ex=self.window_s)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def state(self, user: str, now: float | None = None) -> Window:
        """Return the user's window as it stands. A user who last wrote before the window was
        kept has only their conversation's last interaction: that counts instead."""
        now = time.time() if now is None else now
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                pipe.get(user_key(WINDOW_PREFIX, user))
                pipe.hget(user_key(CONTEXT_PREFIX, user), "last_interaction_timestamp")
                pipe.hget(user_key(MEMORY_PREFIX, user), MESSAGES_OFF_FIELD)
                raw, before, off = pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        last = _seconds(raw) if raw is not None else _seconds(before)
        if not last:  # never wrote, or WhatsApp said it is closed
            return Window(False, None, None, bool(off))
        closes = last + self.window_s
        return Window(now < closes, last, closes, bool(off))

    def hold(self, user: str, text: str, from_: str, kind: str) -> int:
        """Keep a message for when the user writes again; return how many are held now (1:
        the first since the window closed)."""
        key = user_key(HELD_PREFIX, user)
        entry = json.dumps({"text": text, "from": from_, "at": round(time.time(), 3), "kind": kind}, ensure_ascii=False)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.rpush(key, entry)
                pipe.ltrim(key, -HELD_MAX, -1)
                if self.held_ttl_s:
                    pipe.expire(key, self.held_ttl_s)
                pipe.llen(key)
                return int(pipe.execute()[-1])
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def held(self, user: str) -> list[dict[str, Any]]:
        """Return the messages held for the user, oldest first."""
        try:
            raw = self.redis.lrange(user_key(HELD_PREFIX, user), 0, -1)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return [entry for entry in (json_object(r) for r in raw) if entry is not None]

    def take_held(self, user: str) -> list[dict[str, Any]]:
        """Take every held message, oldest first, once: a second caller gets none."""
        try:
            raw = take_list(self.redis, user_key(HELD_PREFIX, user))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return [entry for entry in (json_object(r) for r in raw) if entry is not None]


def _seconds(raw: Any) -> float | None:
    try:
        return float(raw) if raw not in (None, b"", "") else None
    except (TypeError, ValueError):
        return None
