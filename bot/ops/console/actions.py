"""What an operator changes on one user: reset, facts, opt-out, the task call, erase.

Each is a POST (with the CSRF token) that calls the same user operation as the CLI and the
admin API, with actor `console:<operator>`, and redirects back to the user's page.
"""

from __future__ import annotations

from flask import Blueprint, flash, redirect, request, url_for
from flask.typing import ResponseReturnValue

from bot.ops.console.auth import login_required
from bot.ops.console.helpers import actor, services, to_user, user_or_404
from bot.users import memory as operations
from bot.users.lifecycle import erase_user, reset_conversation, set_opt_out, set_task_extraction
from bot.users.memory import OperationError

bp = Blueprint("actions", __name__, url_prefix="/users/<e164>")

VIA = "console"


@bp.post("/reset")
@login_required
def reset(e164: str) -> ResponseReturnValue:
    """Clear the user's conversation (facts are kept)."""
    user = user_or_404(e164)
    existed = reset_conversation(services().users, user, actor(), via=VIA)
    flash("Conversation cleared." if existed else "There was no conversation to clear.", "ok")
    return to_user(user)


@bp.post("/facts")
@login_required
def set_fact(e164: str) -> ResponseReturnValue:
    """Add a fact, or change one (the same key and scope)."""
    user = user_or_404(e164)
    form = request.form
    try:
        importance = float(form.get("importance", "0.8"))
    except ValueError:
        flash("Importance must be a number between 0 and 1.", "error")
        return to_user(user, "facts")
    s = services()
    try:
        fact = operations.set_fact(
            s.users, s.settings, user, form.get("key", ""), form.get("value", ""),
            category=form.get("category") or None,  # none chosen: the one the key implies
            importance=importance, scope=form.get("scope", "user"), actor=actor(),
        )
    except OperationError as err:
        flash(f"Fact not saved: {err}.", "error")
        return to_user(user, "facts")
    flash(f"Saved the fact {fact.key}.", "ok")
    return to_user(user, "facts")


@bp.post("/facts/delete")
@login_required
def delete_fact(e164: str) -> ResponseReturnValue:
    """Delete one fact."""
    user = user_or_404(e164)
    key, scope = request.form.get("key", ""), request.form.get("scope", "user")
    if scope not in operations.SCOPES:
        flash("Scope must be user or session.", "error")
        return to_user(user, "facts")
    existed = operations.delete_fact(services().users, user, key, scope, actor=actor())
    flash(f"Deleted the fact {key}." if existed else f"There was no fact {key}.", "ok" if existed else "error")
    return to_user(user, "facts")


@bp.post("/memory")
@login_required
def memory_setting(e164: str) -> ResponseReturnValue:
    """Turn fact extraction off (opt out) or back on for the user."""
    user = user_or_404(e164)
    opted_out = request.form.get("opted_out") == "1"
    set_opt_out(services().users, user, opted_out, actor=actor(), via=VIA)
    flash("Opted out: no new facts are learned." if opted_out else "Opted in: facts are learned again.", "ok")
    return to_user(user)


@bp.post("/task")
@login_required
def task_setting(e164: str) -> ResponseReturnValue:
    """Turn the task call before each reply on or off for the user."""
    user = user_or_404(e164)
    enabled = request.form.get("enabled") == "1"
    set_task_extraction(services().users, user, enabled, actor=actor(), via=VIA)
    flash(f"Task call {'on' if enabled else 'off'} for this user.", "ok")
    return to_user(user)


@bp.post("/erase")
@login_required
def erase(e164: str) -> ResponseReturnValue:
    """Delete every key of the user, facts included, once the number is typed to confirm."""
    user = user_or_404(e164)
    typed = request.form.get("confirm", "").strip().replace(" ", "")
    if typed != user:
        flash("Nothing erased: type the user's number exactly, with its +, to confirm.", "error")
        return to_user(user, "erase")
    deleted = erase_user(services().users, user, actor(), via=VIA)
    flash(f"Erased a user: {deleted} key(s) deleted.", "ok")
    return redirect(url_for("console.users.index"))
