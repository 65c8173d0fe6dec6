"""Human handover on a user's page: take over, answer as a person, hand back; and the small
JSON the page polls (static/poll.js) so the user's messages appear without a reload.

The operations are bot/users/handover.py's, shared with the CLI and the admin API. The
operator's reply goes out through the channel's sender (app.extensions["bot.sender"]), from
the number the user wrote to, with the StatusCallback that later marks it delivered or failed.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, current_app, flash, g, jsonify, request
from flask.typing import ResponseReturnValue

from bot.ops.console.auth import login_required
from bot.ops.console.helpers import actor, services, settings, to_user, user_or_404
from bot.storage.handover import PERSON, UNDELIVERED, LogEntry
from bot.users import handover as operations
from bot.users.memory import OperationError

bp = Blueprint("handover", __name__, url_prefix="/users/<e164>")

VIA = "console"

#: What the Twilio error codes a person's reply may get mean, for the operator.
TWILIO_ERRORS = {
    "63016": "outside WhatsApp's 24-hour window: the user has to write first (or be sent an approved template)",
    "63015": "the number has not joined the Twilio Sandbox",
    "63003": "WhatsApp could not find the user's number",
    "63024": "WhatsApp refused the recipient",
    "63018": "Twilio's rate limit for this sender was hit",
    "63032": "the user blocked messages from this business",
    "21211": "the number is not a valid phone number",
    "21408": "sending to this region is not enabled on the Twilio account",
    "21610": "the user unsubscribed (replied STOP)",
    "messages_off": "the user sent STOP: outside their 24-hour window the business may not write first",
    "30003": "the phone is unreachable",
    "30005": "the number is unknown or no longer in service",
    "30006": "the number cannot receive this message",
    "30007": "the carrier filtered the message",
    "30008": "unknown delivery error",
}


def reason(status: str | None, code: str | None) -> str:
    """Return why a reply did not reach the user ("" when it did, or is on its way)."""
    if status not in UNDELIVERED and not code:
        return ""
    if not code:
        return "Twilio could not be reached, or gave no reason"
    return f"{TWILIO_ERRORS.get(str(code), 'Twilio error')} ({code})"


def explain(status: str | None, code: str | None) -> str:
    """Say that a reply was not delivered and why ("" when it was, or is on its way)."""
    why = reason(status, code)
    return f"not delivered: {why}" if why else ""


def entry_view(index: int, entry: LogEntry) -> dict[str, Any]:
    """Return one log entry as the page and the poll show it."""
    return {
        "i": index,
        "role": entry.role,  # "user" or "person"
        "text": entry.text,
        "ts": entry.ts,
        "by": entry.by,
        "status": entry.status or None,
        "code": entry.code or None,
        "why": explain(entry.status, entry.code) if entry.role == PERSON else "",
    }


def window_view(user: str) -> dict[str, Any]:
    """Return the user's 24-hour window for the reply box: open or not, until when, and, when
    it is closed, the templates a person may send instead (docs/window.md, Templates)."""
    window = services().users.window
    state = window.state(user) if window is not None else None
    closed = state is not None and not state.open
    catalog = current_app.extensions.get("bot.templates")
    templates, error = catalog.all() if closed and catalog is not None else ([], "")
    return {"open": state is None or state.open, "closes_at": state.closes_at if state else None,
            "last_inbound": state.last_inbound if state else None, "messages_off": bool(state and state.messages_off),
            "templates": [{"sid": t.sid, "name": t.name, "body": t.body, "language": t.language, "source": t.source,
                           "variables": t.fields} for t in templates],
            "templates_error": error}


def handover_view(user: str) -> dict[str, Any]:
    """Return the user's handover for the page: whether it is on, by whom, until when, and
    what was said during it."""
    store = services().handover
    state = store.get(user)
    entries = [entry_view(i, e) for i, e in enumerate(store.entries(user))]
    return {
        "window": window_view(user) if state is not None else None,
        "active": state is not None,
        "by": state.by.removeprefix("console:") if state else "",
        "since": state.since if state else None,
        "expires_at": state.expires_at if state else None,
        "notified": bool(state.notified) if state else False,
        "entries": entries,
        "poll_s": settings().CONSOLE_POLL_S,
        "can_send": current_app.extensions.get("bot.sender") is not None,
    }


@bp.post("/handover/take")
@login_required
def take(e164: str) -> ResponseReturnValue:
    """Pause the bot for this user: a person answers until hand-back (or HANDOVER_TTL_HOURS)."""
    user = user_or_404(e164)
    s = services()
    operations.take_over(s.users, s.handover, user, actor(), via=VIA)
    flash(f"You have taken this conversation over: the bot stays quiet for {settings().HANDOVER_TTL_HOURS} h "
          "or until you hand it back.", "ok")
    return to_user(user, "handover")


@bp.post("/handover/back")
@login_required
def hand_back(e164: str) -> ResponseReturnValue:
    """Give the conversation back to the bot; what was said is folded into its context."""
    user = user_or_404(e164)
    s = services()
    pairs = operations.hand_back(s.users, s.handover, user, actor(), via=VIA)
    flash(f"Handed back to the bot; {pairs} exchange(s) added to its context.", "ok")
    return to_user(user, "handover")


@bp.post("/handover/reply")
@login_required
def reply(e164: str) -> ResponseReturnValue:
    """Send the operator's message to the user, as a person, from the number the user wrote to."""
    user = user_or_404(e164)
    s = services()
    sender = current_app.extensions.get("bot.sender")
    if sender is None:
        flash("Not sent: replies need TWILIO_ACCOUNT_SID (the Messages API account).", "error")
        return to_user(user, "handover")
    try:
        entry = operations.operator_reply(s.users, s.handover, sender.send, user, request.form.get("text", ""),
                                          g.operator)
    except OperationError as err:
        flash(f"Not sent: {err}.", "error")
        return to_user(user, "handover")
    why = reason(entry.status, entry.code)
    if entry.status == "held":  # outside the user's 24-hour window (docs/window.md)
        flash("Held: the user's 24-hour window is closed; it goes when they write again.", "ok")
    else:
        flash(f"Not sent: {why}." if why else "Sent.", "error" if why else "ok")
    return to_user(user, "handover")


@bp.post("/handover/template")
@login_required
def template(e164: str) -> ResponseReturnValue:
    """Send an approved template to the user, its variables filled (the way a person writes
    first once the window is closed)."""
    user = user_or_404(e164)
    s = services()
    sender = current_app.extensions.get("bot.sender")
    catalog = current_app.extensions.get("bot.templates")
    chosen = catalog.get(request.form.get("sid", "")[:40]) if catalog is not None else None
    if sender is None or chosen is None:
        flash("Not sent: " + ("templates need TWILIO_ACCOUNT_SID (the Messages API account)" if sender is None
                              else "that is not one of the templates offered") + ".", "error")
        return to_user(user, "handover")
    values = {name: request.form.get(f"var_{name}", "")[:400] for name in chosen.fields}
    if not chosen.body:  # its text is unknown: an empty optional variable is left out
        values = {k: v for k, v in values.items() if v.strip()}
    try:
        entry = operations.operator_template(s.users, s.handover, sender.send_template, user, chosen.sid, values,
                                             chosen.render(values), g.operator)
    except OperationError as err:
        flash(f"Not sent: {err}.", "error")
        return to_user(user, "handover")
    why = reason(entry.status, entry.code)
    flash(f"Not sent: {why}." if why else f"Template {chosen.name} sent.", "error" if why else "ok")
    return to_user(user, "handover")


@bp.get("/handover.json")
@login_required
def log_json(e164: str) -> ResponseReturnValue:
    """Return the handover's log from entry ?since= on, and the status of every reply (read-only)."""
    user = user_or_404(e164)
    view = handover_view(user)
    since = max(0, request.args.get("since", 0, type=int) or 0)
    entries = view["entries"]
    return jsonify(
        active=view["active"],
        by=view["by"],
        next=len(entries),
        entries=entries[since:],
        statuses=[{"i": e["i"], "status": e["status"], "why": e["why"]} for e in entries if e["role"] == PERSON],
        folded=since > len(entries),  # handed back meanwhile: the page should reload
    )
