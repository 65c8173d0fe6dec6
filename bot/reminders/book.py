"""Set, list and cancel a user's reminders (docs/reminders.md): the one place that checks
what a reminder may be, for the reply model's tools, the CLI, the admin API and the console.

- `due` is an ISO 8601 date-time; without an offset it is read in the user's time zone, with
  one it is taken as given. It must be ahead (a minute of slack for a slow reply), and at
  most MAX_DAYS_AHEAD away.
- A reminder due after the user's 24-hour window closes can only go through
  TEMPLATE_REMINDER_SID; without it the reminder is still kept (the user may write again
  before then), and whoever set it is told.
- Setting one schedules its job on RQ (bot/jobs/reminders.py); cancelling one removes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog

from bot.exceptions import StoreUnavailable
from bot.reminders.zones import FACT_KEY, valid_zone, zone, zone_of_number
from bot.storage.facts import FactStore
from bot.storage.records import Fact
from bot.storage.reminders import Reminder, ReminderStore, TooMany
from bot.storage.window import WindowStore

log = structlog.get_logger(__name__)

#: The furthest ahead a reminder may be.
MAX_DAYS_AHEAD = 366
#: A due time this much in the past still counts as "now" (the model took a while to answer).
PAST_SLACK_S = 60


class ReminderError(Exception):
    """A reminder that cannot be set or found; `reason` is a short code the model and the
    operator read: bad_time, past, too_far, too_many, empty, no_time_zone, not_found."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail or reason


class Scheduler(Protocol):
    """Where a reminder's job waits until it is due (bot/jobs/reminders.py)."""

    def schedule(self, user: str, rid: str, due: float) -> None: ...

    def unschedule(self, user: str, rid: str) -> None: ...


@dataclass(frozen=True)
class TimeZone:
    """The user's time zone and where it came from: user (they said), number, or none."""

    name: str | None
    source: str


def local_time(ts: float, tz_name: str) -> str:
    """Return a moment as the user reads it: "2026-11-29 09:00 (Sunday)"."""
    moment = datetime.fromtimestamp(ts, zone(tz_name))
    return moment.strftime("%Y-%m-%d %H:%M (%A)")


class ReminderBook:
    """The operations on a user's reminders."""

    def __init__(self, store: ReminderStore, facts: FactStore, window: WindowStore | None,
                 scheduler: Scheduler | None, *, template_sid: str | None) -> None:
        self.store = store
        self.facts = facts
        self.window = window
        self.scheduler = scheduler  # None: a process that only reads (inspect)
        self.template_sid = template_sid  # TEMPLATE_REMINDER_SID

    def time_zone(self, user: str) -> TimeZone:
        """Return the user's time zone: the one they told (a session fact), else their number's."""
        try:
            told = self.facts.load(user, "session").get(FACT_KEY)
        except StoreUnavailable:
            told = None
        if told is not None and valid_zone(told.value):
            return TimeZone(valid_zone(told.value), "user")
        by_number = zone_of_number(user)
        return TimeZone(by_number, "number") if by_number else TimeZone(None, "none")

    def set_time_zone(self, user: str, name: str, provenance: str = "") -> str:
        """Keep the zone the user said they are in, as the session fact `time_zone`; return
        its canonical name; raise ReminderError(bad_time_zone)."""
        found = valid_zone(name)
        if found is None:
            raise ReminderError("bad_time_zone", f"{name[:60]!r} is not an IANA time zone (Area/City)")
        now = time.time()
        fact = Fact(key=FACT_KEY, value=found, category="location", confidence=1.0, importance=0.6,
                    source="explicit", created_at=now, updated_at=now, provenance=provenance[:40])
        with_fact = _Upsert({FACT_KEY: fact})
        self.facts.merge(user, "session", with_fact, count_stats=False)
        return found

    def due_time(self, user: str, due: str, now: float | None = None) -> tuple[float, str]:
        """Return (Unix seconds, the zone it is read in) of a due time; raise ReminderError."""
        now = time.time() if now is None else now
        try:
            moment = datetime.fromisoformat(str(due).strip().replace(" ", "T", 1))
        except ValueError as err:
            raise ReminderError("bad_time", f"{str(due)[:40]!r} is not an ISO 8601 date-time") from err
        tz = self.time_zone(user)
        if moment.tzinfo is None:
            if tz.name is None:
                raise ReminderError("no_time_zone", "the user's time zone is unknown: ask where they are")
            moment = moment.replace(tzinfo=zone(tz.name))
            name = tz.name
        else:
            name = tz.name or _offset_name(moment)
        at = moment.timestamp()
        if at < now - PAST_SLACK_S:
            raise ReminderError("past", "that time has passed")
        if at > now + MAX_DAYS_AHEAD * 86400:
            raise ReminderError("too_far", f"at most {MAX_DAYS_AHEAD} days ahead")
        return max(at, now), name

    def add(self, user: str, text: str, due: str, from_: str, by: str = "user",
            now: float | None = None) -> tuple[Reminder, list[str]]:
        """Set a reminder; return it and what whoever set it must be told (notes: outside
        the window with no template, messages off). Raise ReminderError."""
        now = time.time() if now is None else now
        if not text or not text.strip():
            raise ReminderError("empty", "a reminder needs its text")
        at, tz_name = self.due_time(user, due, now)
        try:
            reminder = self.store.add(user, text, at, tz_name, from_, by=by, now=now)
        except TooMany as err:
            raise ReminderError("too_many", f"at most {err} reminders waiting: cancel one first") from err
        if self.scheduler is not None:
            self.scheduler.schedule(user, reminder.id, reminder.due)
        log.info("reminder.set", reminder=reminder.id, due_in_s=round(reminder.due - now), by=by.split(":")[0])
        return reminder, self.notes(user, reminder.due, now)

    def notes(self, user: str, due: float, now: float) -> list[str]:
        """Return why a reminder due then may not arrive (empty: it will)."""
        if self.window is None:
            return []
        try:
            state = self.window.state(user, now)
        except StoreUnavailable:
            return []
        notes = []
        if state.messages_off:
            notes.append("messages_off")
        closes = state.closes_at if state.open else now
        if (closes is None or due > closes) and not self.template_sid:
            notes.append("outside_window")
        return notes

    def list(self, user: str, waiting_only: bool = True) -> list[Reminder]:
        """Return the user's reminders, soonest first (waiting ones only, unless asked)."""
        return [r for r in self.store.all(user) if r.waiting or not waiting_only]

    def cancel(self, user: str, rid: str, by: str = "user") -> Reminder:
        """Cancel one waiting reminder and its job; raise ReminderError(not_found) when the
        user has no such reminder waiting."""
        before = self.store.get(user, rid.strip())
        reminder = self.store.cancel(user, rid.strip(), by=by) if before is not None and before.waiting else None
        if reminder is None or reminder.status != "cancelled":
            raise ReminderError("not_found", f"no reminder {rid[:12]!r} waiting")
        if self.scheduler is not None:
            self.scheduler.unschedule(user, reminder.id)
        log.info("reminder.cancelled", reminder=reminder.id, by=by.split(":")[0])
        return reminder


def public(reminder: Reminder) -> dict[str, Any]:
    """Return a reminder as the model, inspect, the export, the CLI, the admin API and the
    console show it: its times in the user's zone (and as Unix seconds), who set it, and why
    it was not sent, or who cancelled it."""
    r = reminder
    return {"id": r.id, "text": r.text, "due": _iso(r.due, r.tz), "due_ts": r.due, "when": local_time(r.due, r.tz),
            "time_zone": r.tz, "status": r.status, "set_by": r.by, "created": _iso(r.created, r.tz),
            **({"sent_at": _iso(r.sent_at, r.tz), "sent_ts": r.sent_at} if r.sent_at else {}),
            **({"why": r.why} if r.why else {})}


class _Upsert:
    """A facts merge that writes the given facts as they are (bot/memory/rules.py's shape)."""

    def __init__(self, facts: dict[str, Fact]) -> None:
        self.facts = facts

    def __call__(self, existing: dict[str, Fact]) -> Any:
        from bot.memory.rules import MergeResult, MergeStats

        return MergeResult(upserts=self.facts, deletes=[], stats=MergeStats())


def _iso(ts: float, tz_name: str) -> str:
    return datetime.fromtimestamp(ts, zone(tz_name)).isoformat(timespec="minutes")


def _offset_name(moment: datetime) -> str:
    """Return the zone of a due given with an offset, for a user whose zone is unknown: a
    whole hour's IANA name (its sign inverted, as IANA writes it: -03:00 is Etc/GMT+3), else UTC."""
    offset = moment.utcoffset() or timedelta(0)
    hours, rest = divmod(int(offset.total_seconds()), 3600)
    if rest or not hours:
        return "UTC"
    return f"Etc/GMT{-hours:+d}"
