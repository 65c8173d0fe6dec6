"""A user's reminders on the console (docs/reminders.md): set one for them, cancel one. Each
is a POST (with the CSRF token) calling the same operations as the CLI and the admin API,
with actor `console:<operator>`, and redirecting back to the user's page."""

from __future__ import annotations

from flask import Blueprint, flash, request
from flask.typing import ResponseReturnValue

from bot.ops.console.auth import login_required
from bot.ops.console.helpers import actor, services, to_user, user_or_404
from bot.reminders.book import ReminderError
from bot.users.reminders import add_reminder, cancel_reminder, explain

bp = Blueprint("reminders", __name__, url_prefix="/users/<e164>/reminders")

VIA = "console"


@bp.post("")
@login_required
def add(e164: str) -> ResponseReturnValue:
    """Set a reminder for the user, at a time in their time zone."""
    user = user_or_404(e164)
    book = services().reminders
    if book is None:
        flash("Reminders are off (REMINDERS=false).", "error")
        return to_user(user)
    try:
        made = add_reminder(services().users, book, user, request.form.get("text", "")[:300],
                            request.form.get("due", "")[:40], actor=actor(), via=VIA)
    except ReminderError as err:
        flash(f"Reminder not set: {explain(err)}.", "error")
        return to_user(user)
    notes = "".join(f" Note: {note}." for note in made["notes"])
    flash(f"Reminder set for {made['when']} ({made['time_zone']}).{notes}", "ok" if not notes else "error")
    return to_user(user)


@bp.post("/<rid>/cancel")
@login_required
def cancel(e164: str, rid: str) -> ResponseReturnValue:
    """Cancel one of the user's reminders."""
    user = user_or_404(e164)
    book = services().reminders
    try:
        if book is None:
            raise ReminderError("not_found")
        done = cancel_reminder(book, user, rid[:12], actor=actor(), via=VIA)
    except ReminderError as err:
        flash(f"Nothing cancelled: {explain(err)}.", "error")
        return to_user(user)
    flash(f"Cancelled the reminder for {done['when']}.", "ok")
    return to_user(user)
