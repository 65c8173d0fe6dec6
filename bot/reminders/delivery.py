"""Send a reminder when it is due (docs/reminders.md, Sending): inside the user's window as
text, outside it through TEMPLATE_REMINDER_SID with the text as variable {{1}}, never when
no template is set (undeliverable) or the user sent STOP (not_sent).

Exactly once: the job takes the reminder first (bot/storage/reminders.py take: one job wins,
with a lease); a job redone after its worker died mid-send looks in the outbox for the very
message before sending it again.
"""

from __future__ import annotations

import time
from typing import Protocol

import structlog

from bot.exceptions import StoreUnavailable
from bot.observability.metrics import REMINDERS_SENT
from bot.storage.outbox import OutboxStore
from bot.storage.reminders import PENDING, SENT, ReminderStore

log = structlog.get_logger(__name__)

#: The outbox's kind for a reminder (and the held message's, after a 63016).
KIND = "reminder"


class Sender(Protocol):
    """The one outbound path (bot/channels/twilio/sender.py MessageSender.send_first)."""

    def send_first(self, user: str, from_: str, text: str, kind: str, template_sid: str | None,
                   variables: dict[str, str] | None = None) -> tuple[str, str]: ...


def deliver(user: str, rid: str, store: ReminderStore, sender: Sender, outbox: OutboxStore | None, *,
            template_sid: str | None, default_from: str = "", now: float | None = None) -> str:
    """Send one due reminder; return what came of it: sent, undeliverable, not_sent, failed,
    early (given back: not due yet), or skipped (cancelled, sent, erased, or another job has
    it). Raise for a retry (the network, Redis); the reminder is given back first."""
    now = time.time() if now is None else now
    reminder = store.take(user, rid, now)
    if reminder is None:
        return "skipped"
    if reminder.due > now + 1:
        store.settle(user, rid, PENDING)
        return "early"
    if reminder.extra.get("retaken") and outbox is not None:
        sid = outbox.sent_since(user, KIND, reminder.text, reminder.due - 5)
        if sid:
            store.settle(user, rid, SENT, sid=sid)
            log.info("reminder.already_sent", reminder=rid)
            return "skipped"
    try:
        outcome, detail = sender.send_first(user, reminder.from_ or default_from, reminder.text, KIND, template_sid,
                                            {"1": reminder.text})
    except Exception:
        try:
            store.settle(user, rid, PENDING)  # the retry sends it
        except StoreUnavailable:
            pass  # the lease runs out; the retry takes it then
        raise
    status = {"sent": SENT, "messages_off": "not_sent"}.get(outcome, outcome)
    store.settle(user, rid, status, sid=detail if outcome == "sent" else "", why="" if outcome == "sent" else detail
                 or outcome)
    REMINDERS_SENT.labels(outcome=status).inc()
    log.info("reminder.done", reminder=rid, outcome=status, late_s=round(now - reminder.due, 1))
    return status
