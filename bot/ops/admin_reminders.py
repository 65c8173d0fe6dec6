"""A user's reminders through the admin API, behind the same bearer token (docs/reminders.md).

    GET    /admin/users/<e164>/reminders         every reminder kept, soonest first
    POST   /admin/users/<e164>/reminders         {"text", "due"}: set one (201), with `notes`
                                                 on why it may not arrive
    DELETE /admin/users/<e164>/reminders/<id>    cancel one waiting
"""

from __future__ import annotations

from flask import Blueprint, abort, jsonify
from flask.typing import ResponseReturnValue

from bot.ops.api import guard, json_body, services, user_param
from bot.reminders.book import ReminderBook, ReminderError
from bot.users.reminders import add_reminder, cancel_reminder, explain, list_reminders

bp = Blueprint("admin_reminders", __name__, url_prefix="/admin")
guard(bp)


def book() -> ReminderBook:
    found = services().reminders
    if found is None:
        abort(404)
    return found


@bp.errorhandler(ReminderError)
def reminder_error(err: ReminderError) -> ResponseReturnValue:
    """A reminder refused (a bad time, too many, none such): 400, or 404, with the reason."""
    return jsonify(error=explain(err), reason=err.reason), 404 if err.reason == "not_found" else 400


@bp.get("/users/<e164>/reminders")
def reminders(e164: str) -> ResponseReturnValue:
    """Return the user's reminders."""
    return jsonify(user=user_param(e164), reminders=list_reminders(services().users, user_param(e164)))


@bp.post("/users/<e164>/reminders")
def add(e164: str) -> ResponseReturnValue:
    """Set a reminder for the user."""
    body = json_body()
    made = add_reminder(services().users, book(), user_param(e164), str(body.get("text") or ""),
                        str(body.get("due") or ""), actor="admin_api", via="admin_api")
    return jsonify(made), 201


@bp.delete("/users/<e164>/reminders/<rid>")
def cancel(e164: str, rid: str) -> ResponseReturnValue:
    """Cancel one of the user's reminders."""
    return jsonify(cancel_reminder(book(), user_param(e164), rid, actor="admin_api", via="admin_api"))
