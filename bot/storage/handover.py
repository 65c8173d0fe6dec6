"""Human handover: a person has taken a user's conversation over, and what was said meanwhile.

Keys (bot/storage/keys.py): ``chat_handover:{+E164}`` hash with ``by`` (who took over),
``since`` (Unix seconds) and ``notified`` (``1`` once the user got HANDOVER_NOTICE); it
expires HANDOVER_TTL_HOURS after the takeover, and then the bot answers again.
``chat_handover_log:{+E164}`` list, oldest first, of JSON entries
``{r: "user"|"person", t: text, ts, by?, sid?, st?, code?}``: the user's messages and the
person's replies (with the Messages API's sid, its delivery status and Twilio's error code),
kept until they are folded into pairs of the conversation (bot/users/handover.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import HANDOVER_LOG_PREFIX, HANDOVER_PREFIX, user_key
from bot.storage.records import as_float, take_list, text
from bot.storage.scripts import Scripts

#: Delivery statuses in the order Twilio reports them; a later one is never overwritten by an
#: earlier one arriving late. "failed" and "undelivered" are final.
STATUS_RANK = {"sent": 1, "delivered": 2, "read": 3, "undelivered": 4, "failed": 4}
#: The statuses that mean the user never got the person's message.
UNDELIVERED = ("failed", "undelivered")
USER, PERSON = "user", "person"


@dataclass(frozen=True)
class Handover:
    """A takeover in force."""

    by: str
    since: float
    expires_at: float | None  # None: the hash has no TTL (never, unless handed back)
    notified: bool

    def to_public(self) -> dict[str, Any]:
        """Return the takeover as inspect, export and the admin API show it."""
        return {"by": self.by, "since": self.since, "expires_at": self.expires_at, "notified": self.notified}


@dataclass(frozen=True)
class LogEntry:
    """One message of a handover: the user's, or the person's reply with its delivery."""

    role: str  # USER or PERSON
    text: str
    ts: float
    by: str = ""  # the person's name
    sid: str = ""  # the Messages API's sid of the person's reply
    status: str = ""  # sent, held (outside the window: sent when the user writes), delivered, read, failed, undelivered
    code: str = ""  # Twilio's error code, e.g. 63016 (outside the 24-hour window)

    @property
    def delivered(self) -> bool:
        """Return whether the message may have reached the user (not failed, not undelivered)."""
        return self.status not in UNDELIVERED

    def to_json(self) -> str:
        """Serialize for Redis, leaving out empty fields."""
        obj: dict[str, Any] = {"r": self.role, "t": self.text, "ts": round(self.ts, 3)}
        for name, value in (("by", self.by), ("sid", self.sid), ("st", self.status), ("code", self.code)):
            if value:
                obj[name] = value
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    def to_public(self) -> dict[str, Any]:
        """Return the entry as inspect, export and the console show it."""
        return {"role": self.role, "text": self.text, "ts": self.ts, "by": self.by or None,
                "sid": self.sid or None, "status": self.status or None, "error_code": self.code or None}

    @classmethod
    def from_json(cls, raw: Any) -> "LogEntry | None":
        """Parse one stored entry; None for a corrupt one."""
        try:
            obj = json.loads(text(raw))
        except (TypeError, ValueError):
            return None
        if not isinstance(obj, dict) or obj.get("r") not in (USER, PERSON):
            return None
        return cls(role=obj["r"], text=str(obj.get("t", "")), ts=as_float(obj.get("ts"), "handover.ts") or 0.0,
                   by=str(obj.get("by", "")), sid=str(obj.get("sid", "")), status=str(obj.get("st", "")),
                   code=str(obj.get("code", "")))


def _entries(raw: list[Any]) -> list[LogEntry]:
    return [e for e in (LogEntry.from_json(item) for item in raw) if e is not None]


class HandoverStore:
    """Take a conversation over, give it back, and keep what was said meanwhile."""

    def __init__(self, client: redis.Redis, *, ttl_seconds: int, log_ttl_seconds: int = 0) -> None:
        self.redis = client
        self.ttl_seconds = ttl_seconds
        self.log_ttl_seconds = log_ttl_seconds  # 0: the log has no expiry
        self.scripts = Scripts(client, "handover_notify", "handover_status")

    @staticmethod
    def _key(user: str) -> str:
        return user_key(HANDOVER_PREFIX, user)

    @staticmethod
    def _log_key(user: str) -> str:
        return user_key(HANDOVER_LOG_PREFIX, user)

    def take(self, user: str, operator: str, now: float | None = None) -> Handover:
        """Pause the bot for this user, for the TTL from now. Taken again while in force, the
        new person holds it and its TTL starts again; `since` and the notice stay as they were."""
        key = self._key(user)
        now = time.time() if now is None else now
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(key, "by", operator)
                pipe.hsetnx(key, "since", repr(now))
                pipe.hsetnx(key, "notified", "0")
                pipe.expire(key, self.ttl_seconds)
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        handover = self.get(user)
        return handover or Handover(operator, now, now + self.ttl_seconds, False)

    def release(self, user: str) -> bool:
        """End the takeover; return whether one was in force."""
        try:
            return bool(self.redis.delete(self._key(user)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def get(self, user: str) -> Handover | None:
        """Return the takeover in force, or None."""
        return self.state(user)[0]

    def state(self, user: str, now: float | None = None) -> tuple[Handover | None, bool]:
        """Return the takeover in force (or None) and whether a log waits to be folded, in
        one round trip (the message path asks this of every message)."""
        try:
            with self.redis.pipeline(transaction=False) as pipe:
                pipe.hgetall(self._key(user))
                pipe.pttl(self._key(user))
                pipe.exists(self._log_key(user))
                raw, pttl, log_exists = pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        data = {text(k): text(v) for k, v in raw.items()}
        if not data:
            return None, bool(log_exists)
        now = time.time() if now is None else now
        handover = Handover(
            by=data.get("by", ""),
            since=as_float(data.get("since"), "handover.since") or 0.0,
            expires_at=round(now + int(pttl) / 1000, 3) if int(pttl) > 0 else None,
            notified=data.get("notified") == "1",
        )
        return handover, bool(log_exists)

    def mark_notified(self, user: str) -> bool:
        """Record that the user got the notice; True only for the first caller of a takeover."""
        return bool(self.scripts.run("handover_notify", {"handover": self._key(user)}, {}))

    # -- the log -----------------------------------------------------------------------
    def append(self, user: str, entry: LogEntry) -> int:
        """Add one message to the log; return the log's length."""
        key = self._log_key(user)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.rpush(key, entry.to_json())
                if self.log_ttl_seconds:
                    pipe.expire(key, self.log_ttl_seconds)
                length = pipe.execute()[0]
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return int(length)

    def entries(self, user: str, start: int = 0) -> list[LogEntry]:
        """Return the log from index `start` on (the console polls for what is new), oldest first."""
        try:
            raw = self.redis.lrange(self._log_key(user), max(start, 0), -1)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return _entries(raw)

    def set_status(self, user: str, sid: str, status: str, code: str | None = None) -> bool:
        """Record the delivery status of the person's message with this sid; return whether
        an entry changed (False: not a handover message, or a later status is there)."""
        if status not in STATUS_RANK:
            return False
        return bool(self.scripts.run(
            "handover_status", {"log": self._log_key(user)},
            {"sid": sid, "status": status, "code": code or None, "rank": STATUS_RANK},
        ))

    def take_log(self, user: str) -> list[LogEntry]:
        """Return the whole log and delete it, atomically: two folds never read it twice."""
        try:
            raw = take_list(self.redis, self._log_key(user))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return _entries(raw)

