"""A user's reminders as operators manage them (docs/reminders.md): the CLI, the admin API
and the console call these, so each says the same thing the same way."""

from __future__ import annotations

from typing import Any

import structlog

from bot.observability.logs import mask_phone
from bot.reminders.book import ReminderBook, ReminderError, public
from bot.users.data import UserData
from bot.users.reports import reminders_report

log = structlog.get_logger(__name__)

#: What an operator is told for each reason a reminder was refused.
REASONS = {
    "bad_time": "the time is not an ISO 8601 date-time (2026-12-01T09:00)",
    "past": "that time has passed",
    "too_far": "at most 366 days ahead",
    "too_many": "the user has the most reminders allowed waiting (REMINDERS_MAX_PER_USER): cancel one first",
    "empty": "a reminder needs its text",
    "no_time_zone": "the user's time zone is unknown: give the time with its offset (2026-12-01T09:00-03:00)",
    "not_found": "no such reminder waiting",
}
#: What an operator is told for each reason a reminder may not arrive.
NOTES = {
    "outside_window": "it falls outside the user's 24-hour window and TEMPLATE_REMINDER_SID is unset: it arrives "
                      "only if they write in the 24 hours before",
    "messages_off": "the user sent STOP: it will not be sent unless they send START",
}


def explain(err: ReminderError) -> str:
    """Return a refusal in an operator's words."""
    return REASONS.get(err.reason, err.detail)


def add_reminder(data: UserData, book: ReminderBook, user: str, text: str, due: str, actor: str,
                 via: str) -> dict[str, Any]:
    """Set a reminder for a user as an operator; return it, with `notes` on why it may not
    arrive. Raise ReminderError."""
    from_ = data.store.load(user).reply_from
    reminder, notes = book.add(user, text, due, from_, by=f"operator:{actor}")
    log.info("audit.reminder_set", actor=actor, target=mask_phone(user), via=via, reminder=reminder.id)
    return {**public(reminder), "notes": [NOTES[n] for n in notes]}


def cancel_reminder(book: ReminderBook, user: str, rid: str, actor: str, via: str) -> dict[str, Any]:
    """Cancel one of a user's reminders as an operator; raise ReminderError(not_found)."""
    reminder = book.cancel(user, rid, by=f"operator:{actor}")
    log.info("audit.reminder_cancelled", actor=actor, target=mask_phone(user), via=via, reminder=reminder.id)
    return public(reminder)


def list_reminders(data: UserData, user: str) -> list[dict[str, Any]]:
    """Return every reminder of the user (waiting, and done ones still kept), soonest first."""
    return reminders_report(data, user)
