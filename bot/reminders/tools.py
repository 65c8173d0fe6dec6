"""The reminders as built-in tools of the reply model (docs/reminders.md): set_reminder,
list_reminders, cancel_reminder and set_time_zone, offered in the same call as the
business's tools (bot/conversation/tool_use.py), so a message that asks for nothing costs
no extra model call. With them goes one line telling the model the user's time now.

The model's arguments are checked here (bot/reminders/book.py); what it is told back is
data for it to say in the user's words: what was set and when, in the user's time.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import structlog

from bot.exceptions import StoreUnavailable
from bot.reminders.book import ReminderBook, ReminderError, local_time, public
from bot.reminders.zones import zone

log = structlog.get_logger(__name__)

NAMES = ("set_reminder", "list_reminders", "cancel_reminder", "set_time_zone")
#: Those that change the user's reminders: never after a business tool's answer in the same
#: message (what an outside system says cannot set or cancel anything: docs/reminders.md).
WRITES = frozenset({"set_reminder", "cancel_reminder", "set_time_zone"})

#: Said to the model when the user's time zone is unknown.
UNKNOWN_ZONE = ("The user's time zone is unknown: before setting a reminder for a time of day, ask where they are "
                "and call set_time_zone.")
#: Told back, for each reason a reminder may not arrive.
NOTES = {
    "outside_window": ("WhatsApp lets the business write first only within 24 hours of the user's last message, "
                       "and this reminder falls outside that: tell the user it will arrive only if they have written "
                       "to you in the 24 hours before it."),
    "messages_off": "The user turned the business's messages off (STOP): tell them to send START to get reminders.",
}


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required, "additionalProperties": False}}}


DEFINITIONS = [
    _function("set_reminder", "Remind the user of something at a time they ask for.", {
        "text": {"type": "string", "description": "what, short, in the user's language"},
        "due": {"type": "string", "description": "ISO 8601 local date-time, no offset"},
    }, ["text", "due"]),
    _function("list_reminders", "The user's coming reminders, with ids.", {}, []),
    _function("cancel_reminder", "Cancel a reminder by id.", {"id": {"type": "string"}}, ["id"]),
    _function("set_time_zone", "Keep the user's time zone when they say where they are.",
              {"time_zone": {"type": "string", "description": "IANA, e.g. America/Manaus"}}, ["time_zone"]),
]


class ReminderTools:
    """The reply model's reminder tools, for one deployment."""

    names = frozenset(NAMES)
    writes = WRITES

    def __init__(self, book: ReminderBook) -> None:
        self.book = book

    def definitions(self) -> list[dict[str, Any]]:
        return DEFINITIONS

    def now_line(self, user: str, now: float | None = None) -> str:
        """Return the line that tells the model the user's time now, and their zone."""
        now = time.time() if now is None else now
        tz = self.book.time_zone(user)
        if tz.name is None:
            moment = datetime.fromtimestamp(now, zone("UTC"))
            return f"Now: {moment.strftime('%Y-%m-%dT%H:%M:%S (%A)')} UTC. {UNKNOWN_ZONE}"
        moment = datetime.fromtimestamp(now, zone(tz.name))
        return f"Now, for the user: {moment.strftime('%Y-%m-%dT%H:%M:%S (%A)')}, time zone {tz.name}."

    def call(self, name: str, arguments: dict[str, Any], *, user: str, from_: str, sid: str) -> dict[str, Any]:
        """Run one reminder tool for the user; return what the model is told."""
        try:
            if name == "set_reminder":
                reminder, notes = self.book.add(user, str(arguments.get("text") or ""), str(arguments.get("due") or ""),
                                                from_, by="user")
                shown = public(reminder)
                return {"set": True, "id": reminder.id, "text": reminder.text, "when": shown["when"],
                        "time_zone": reminder.tz, **({"note": " ".join(NOTES[n] for n in notes)} if notes else {})}
            if name == "list_reminders":
                listed = [{k: v for k, v in public(r).items() if k in ("id", "text", "when", "time_zone")}
                          for r in self.book.list(user)]
                return {"reminders": listed}
            if name == "cancel_reminder":
                cancelled = self.book.cancel(user, str(arguments.get("id") or ""), by="user")
                return {"cancelled": True, "id": cancelled.id, "text": cancelled.text,
                        "when": local_time(cancelled.due, cancelled.tz)}
            if name == "set_time_zone":
                found = self.book.set_time_zone(user, str(arguments.get("time_zone") or ""), provenance=sid)
                return {"time_zone": found, "now": self.now_line(user)}
        except ReminderError as err:
            return {"error": err.reason, "detail": err.detail}
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="reminders", error=str(err))
            return {"error": "unavailable", "detail": "reminders cannot be reached right now: say so"}
        return {"error": "unknown_tool"}
