"""What was sent to a user through the Messages API, for a while, and what failed to arrive
(docs/window.md, Delivery failures).

Keys: ``chat_outbox:{+E164}``, a hash: Twilio's message sid -> JSON ``{text, from, kind, at}``
of the messages sent within the window's length (WHATSAPP_WINDOW_S), so a 63016 (outside the window) that Twilio
reports later can hold the very text for the user's next message. ``chat_failed:{+E164}``, a
list, newest first, of JSON ``{sid, code, at, kind}``: the deliveries that failed, for the
console and inspect. Both are the user's (inspected, exported, erased with them).
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import FAILED_PREFIX, OUTBOX_PREFIX, user_key
from bot.storage.records import json_object

#: Messages kept per user; past it the outbox starts afresh (a flood, never a conversation).
OUTBOX_MAX = 200
#: Failures kept per user.
FAILED_MAX = 20


class OutboxStore:
    """The messages sent lately, by Twilio's sid, and the failed deliveries, per user."""

    def __init__(self, client: redis.Redis, outbox_ttl_s: int, failed_ttl_s: int) -> None:
        self.redis = client
        self.outbox_ttl_s = outbox_ttl_s  # WHATSAPP_WINDOW_S: no status comes later than that matters
        self.failed_ttl_s = failed_ttl_s  # the context's TTL rule (0: none)

    def sent(self, user: str, sid: str, text: str, from_: str, kind: str, template: bool = False) -> None:
        """Keep a message Twilio accepted (a template's: marked so), until its delivery is known."""
        key = user_key(OUTBOX_PREFIX, user)
        entry = json.dumps({"text": text, "from": from_, "kind": kind, "at": round(time.time(), 3),
                            **({"template": True} if template else {})}, ensure_ascii=False)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.hlen(key)
                pipe.hset(key, sid, entry)
                pipe.expire(key, self.outbox_ttl_s)
                size = pipe.execute()[0]
            if size >= OUTBOX_MAX:
                self.redis.delete(key)
                self.redis.hset(key, sid, entry)
                self.redis.expire(key, self.outbox_ttl_s)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def failed(self, user: str, sid: str, code: str, kind: str = "") -> dict[str, Any] | None:
        """Record a delivery that failed; return what was sent under that sid (None: not ours,
        or long ago), taken out of the outbox."""
        key = user_key(OUTBOX_PREFIX, user)
        failures = user_key(FAILED_PREFIX, user)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.hget(key, sid)
                pipe.hdel(key, sid)
                raw = pipe.execute()[0]
            sent = json_object(raw)
            entry = {"sid": sid, "code": code, "at": round(time.time(), 3),
                     "kind": (sent or {}).get("kind") or kind}
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.lpush(failures, json.dumps(entry))
                pipe.ltrim(failures, 0, FAILED_MAX - 1)
                if self.failed_ttl_s:
                    pipe.expire(failures, self.failed_ttl_s)
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return sent

    def failures(self, user: str) -> list[dict[str, Any]]:
        """Return the failed deliveries, newest first."""
        try:
            raw = self.redis.lrange(user_key(FAILED_PREFIX, user), 0, FAILED_MAX - 1)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return [entry for entry in (json_object(r) for r in raw) if entry is not None]

    def sent_since(self, user: str, kind: str | None, text_: str | None, since: float,
                   template: bool = False) -> str | None:
        """Return the sid of a message of this kind and text (None: any; a template only, with
        `template`) sent since then, if one was (a job that died after Twilio took its message
        must not send it again; a user sent a template needs no reopen template too)."""
        try:
            raw = self.redis.hgetall(user_key(OUTBOX_PREFIX, user))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        for sid, value in raw.items():
            entry = json_object(value)
            if entry and kind in (None, entry.get("kind")) and text_ in (None, entry.get("text")) \
                    and float(entry.get("at") or 0) >= since and (entry.get("template") or not template):
                return sid.decode() if isinstance(sid, bytes) else str(sid)
        return None
