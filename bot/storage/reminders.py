"""The users' reminders (docs/reminders.md).

Keys: ``chat_reminders:{+E164}``, a hash: reminder id -> JSON ``{id, text, due, tz, from,
status, created, by, sent_at?, sid?, why?, lease?}``; it expires REMINDERS_KEEP_DAYS after
its latest reminder's time. ``reminders_due``, one sorted set for the deployment: member
``<+E164>|<id>``, score the due time, for every reminder still to send; the workers' sweep
reads it for a reminder whose scheduled job was lost (a queue's Redis restarted empty).

A reminder is `pending` until its job takes it (`sending`, with a lease), then `sent`,
`undeliverable` (outside the window with no template), `not_sent` (the user sent STOP),
`failed` (Twilio refused it) or `cancelled`. Taking it is one optimistic transaction, so
two jobs for one reminder (a redone job, the sweep) send it once.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import REMINDERS_DUE_KEY, REMINDERS_PREFIX, user_key
from bot.storage.optimistic import watched
from bot.storage.records import json_object, text

PENDING = "pending"
SENDING = "sending"
SENT = "sent"
CANCELLED = "cancelled"
#: The states a reminder ends in: it leaves the due index, and stays listed a while.
DONE = frozenset({SENT, CANCELLED, "undeliverable", "not_sent", "failed"})
#: How long a job may hold a reminder it took before another may look again (the send's
#: own timeout, twice, and its one retry).
LEASE_S = 60
#: The longest reminder text kept (a reminder is a line, not a letter).
MAX_TEXT = 300


@dataclass
class Reminder:
    """One reminder: what to say, when (Unix seconds), in which time zone it was asked."""

    id: str
    text: str
    due: float
    tz: str
    from_: str = ""  # the number the user wrote to (whatsapp:+…): the reminder goes from it
    status: str = PENDING
    created: float = 0.0
    by: str = "user"  # user, or operator:<name>
    sent_at: float | None = None
    sid: str = ""  # Twilio's message sid, once sent
    why: str = ""  # why it was not sent (undeliverable, not_sent, failed: Twilio's code)
    lease: float = 0.0  # a job holds it (sending) until then
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if v not in (None, "", 0.0, {}) or k in ("id", "due", "status")}
        data["from"] = data.pop("from_", "")
        data.pop("extra", None)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: Any) -> "Reminder | None":
        data = json_object(raw)
        if data is None or not data.get("id"):
            return None
        try:
            return cls(id=str(data["id"]), text=str(data.get("text", "")), due=float(data["due"]),
                       tz=str(data.get("tz", "UTC")), from_=str(data.get("from", "")),
                       status=str(data.get("status", PENDING)), created=float(data.get("created", 0) or 0),
                       by=str(data.get("by", "user")), sent_at=data.get("sent_at"), sid=str(data.get("sid", "")),
                       why=str(data.get("why", "")), lease=float(data.get("lease", 0) or 0))
        except (TypeError, ValueError):
            return None

    @property
    def waiting(self) -> bool:
        """Whether it is still to be sent."""
        return self.status in (PENDING, SENDING)


class TooMany(Exception):
    """The user has REMINDERS_MAX_PER_USER reminders waiting already."""


class ReminderStore:
    """Each user's reminders, and one index of them by due time."""

    def __init__(self, client: redis.Redis, keep_s: int, max_per_user: int) -> None:
        self.redis = client
        self.keep_s = keep_s  # REMINDERS_KEEP_DAYS
        self.max_per_user = max_per_user  # REMINDERS_MAX_PER_USER

    @staticmethod
    def member(user: str, rid: str) -> str:
        """Return the due index's member for one reminder."""
        return f"{user}|{rid}"

    def _read(self, client: Any, user: str) -> dict[str, Reminder]:
        raw = client.hgetall(user_key(REMINDERS_PREFIX, user))
        out = {}
        for value in raw.values():
            reminder = Reminder.from_json(text(value))
            if reminder is not None:
                out[reminder.id] = reminder
        return out

    def _expire(self, pipe: Any, key: str, reminders: dict[str, Reminder]) -> None:
        if reminders:
            pipe.expireat(key, int(max(r.due for r in reminders.values()) + self.keep_s) + 1)

    def all(self, user: str) -> list[Reminder]:
        """Return the user's reminders, soonest first."""
        try:
            return sorted(self._read(self.redis, user).values(), key=lambda r: r.due)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def get(self, user: str, rid: str) -> Reminder | None:
        try:
            return Reminder.from_json(text(self.redis.hget(user_key(REMINDERS_PREFIX, user), rid)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def add(self, user: str, text_: str, due: float, tz: str, from_: str, by: str = "user",
            now: float | None = None) -> Reminder:
        """Store a new reminder; raise TooMany past REMINDERS_MAX_PER_USER waiting ones. Done
        reminders older than REMINDERS_KEEP_DAYS are dropped on the way."""
        now = time.time() if now is None else now
        key = user_key(REMINDERS_PREFIX, user)
        reminder = Reminder(id=secrets.token_hex(3), text=text_.strip()[:MAX_TEXT], due=due, tz=tz, from_=from_,
                            created=round(now, 3), by=by)

        def attempt(pipe: Any) -> Reminder:
            existing = self._read(pipe, user)
            if sum(1 for r in existing.values() if r.waiting) >= self.max_per_user:
                pipe.unwatch()
                raise TooMany(str(self.max_per_user))
            stale = [r.id for r in existing.values() if r.status in DONE and r.due + self.keep_s < now]
            kept = {k: v for k, v in existing.items() if k not in stale}
            kept[reminder.id] = reminder
            pipe.multi()
            if stale:
                pipe.hdel(key, *stale)
            pipe.hset(key, reminder.id, reminder.to_json())
            self._expire(pipe, key, kept)
            pipe.execute()
            return reminder

        made = watched(self.redis, (key,), attempt, "reminders")
        self._index(user, made)
        return made

    def _index(self, user: str, reminder: Reminder) -> None:
        """Put a waiting reminder in the due index, or take a done one out (a key of its own:
        another slot on a cluster, so not in the user's transaction)."""
        try:
            if reminder.waiting:
                self.redis.zadd(REMINDERS_DUE_KEY, {self.member(user, reminder.id): reminder.due})
            else:
                self.redis.zrem(REMINDERS_DUE_KEY, self.member(user, reminder.id))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def _change(self, user: str, rid: str, change: Any) -> Reminder | None:
        """Apply change(reminder) -> the new reminder or None (leave it) atomically; return
        the reminder as stored after, or None when there is none."""
        key = user_key(REMINDERS_PREFIX, user)

        def attempt(pipe: Any) -> tuple[Reminder | None, bool]:
            current = Reminder.from_json(text(pipe.hget(key, rid)))
            if current is None:
                pipe.unwatch()
                return None, False
            new = change(current)
            if new is None:
                pipe.unwatch()
                return current, False
            pipe.multi()
            pipe.hset(key, rid, new.to_json())
            pipe.execute()
            return new, True

        reminder, changed = watched(self.redis, (key,), attempt, "reminders")
        if reminder is not None and changed:
            self._index(user, reminder)
        return reminder

    def cancel(self, user: str, rid: str, by: str = "user") -> Reminder | None:
        """Cancel a waiting reminder; return it (as it stands: one already sent stays sent),
        or None when there is no such reminder."""
        def change(r: Reminder) -> Reminder | None:
            if not r.waiting:
                return None
            r.status, r.why = CANCELLED, by
            return r
        return self._change(user, rid, change)

    def take(self, user: str, rid: str, now: float | None = None) -> Reminder | None:
        """Take a due reminder to send it: pending (or sending, its lease over: the job that
        took it died) becomes sending with a lease. Return it, or None when it is not to be
        sent now (done, cancelled, held by a live job, or gone)."""
        now = time.time() if now is None else now
        taken: list[Reminder] = []

        def change(r: Reminder) -> Reminder | None:
            if r.status == PENDING or (r.status == SENDING and r.lease < now):
                r.extra["retaken"] = r.status == SENDING
                r.status, r.lease = SENDING, round(now + LEASE_S, 3)
                taken[:] = [r]  # (a retried transaction calls this again)
                return r
            return None

        self._change(user, rid, change)
        return taken[0] if taken else None

    def settle(self, user: str, rid: str, status: str, *, sid: str = "", why: str = "",
               now: float | None = None) -> Reminder | None:
        """Record how a taken reminder ended (sent, undeliverable, not_sent, failed), or give
        it back (pending) for the job's retry."""
        now = time.time() if now is None else now

        def change(r: Reminder) -> Reminder | None:
            if r.status != SENDING:
                return None  # cancelled or erased meanwhile: nothing to record
            r.status, r.lease = status, 0.0
            if status == SENT:
                r.sent_at, r.sid = round(now, 3), sid
            r.why = why
            return r

        return self._change(user, rid, change)

    def due(self, before: float, limit: int = 200) -> list[tuple[str, str, float]]:
        """Return (user, reminder id, due) of the reminders due before `before`, oldest first."""
        try:
            rows = self.redis.zrangebyscore(REMINDERS_DUE_KEY, "-inf", before, start=0, num=limit, withscores=True)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        out = []
        for member, score in rows:
            user, _, rid = text(member).rpartition("|")
            if user and rid:
                out.append((user, rid, float(score)))
        return out

    def forget(self, user: str, rids: list[str] | None = None) -> int:
        """Take the user's reminders out of the due index (an erase: the hash goes with the
        user's keys); return how many were there."""
        try:
            if rids is None:
                rids = [text(k) for k in self.redis.hkeys(user_key(REMINDERS_PREFIX, user))]
            if not rids:
                return 0
            return int(self.redis.zrem(REMINDERS_DUE_KEY, *(self.member(user, r) for r in rids)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
