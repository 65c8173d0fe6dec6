"""Sign-in and sign-out, the session's operator (g.operator) and `login_required`, after
flaskr's auth.py.

The session holds the operator's name and the sign-in time only (and Flask-WTF's CSRF
token). A session ends CONSOLE_SESSION_MINUTES after sign-in, whatever the cookie says,
and at once when the operator's account is removed. The admin token, with the name left
empty, signs in as `admin`, so the first operator can get in.
"""

from __future__ import annotations

import functools
import hmac
import time
from typing import Any, Callable
from urllib.parse import urlsplit

import structlog
from flask import Blueprint, current_app, flash, g, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue

from bot.ops.console.helpers import mask_address, operators, settings
from bot.storage.operators import ADMIN_NAME

log = structlog.get_logger(__name__)

bp = Blueprint("auth", __name__)


@bp.before_app_request
def load_operator() -> None:
    """Put the session's operator in g.operator (None when nobody is signed in)."""
    g.operator = None
    if "console" not in request.blueprints or request.endpoint == "console.static":
        return
    name, signed_in_at = session.get("op"), session.get("at")
    if not isinstance(name, str) or not isinstance(signed_in_at, (int, float)):
        return
    if time.time() - signed_in_at > settings().CONSOLE_SESSION_MINUTES * 60:
        session.clear()
        log.info("console.session_expired", operator=name)
        return
    if name != ADMIN_NAME and not operators().exists(name):
        session.clear()
        log.info("console.session_ended", operator=name, reason="account removed")
        return
    g.operator = name


def login_required(view: Callable[..., ResponseReturnValue]) -> Callable[..., ResponseReturnValue]:
    """Send a visitor without a session to sign-in; check the CSRF token of every POST
    (a POST without a valid one: 400, nothing changed)."""

    @functools.wraps(view)
    def wrapped(**kwargs: Any) -> ResponseReturnValue:
        if g.operator is None:
            target = request.full_path.rstrip("?") if request.method == "GET" else None
            return redirect(url_for("console.auth.signin", next=target))
        if request.method == "POST":
            current_app.extensions["csrf"].protect()
        return view(**kwargs)

    return wrapped


def safe_next(target: str | None) -> str:
    """Return where to go after sign-in: a console path, never another site."""
    parts = urlsplit(target or "")
    if parts.scheme or parts.netloc or "\\" in (target or "") or not (
        parts.path == "/console" or parts.path.startswith("/console/")
    ):
        return url_for("console.overview.index")
    return target or ""


@bp.route("/signin", methods=("GET", "POST"))
def signin() -> ResponseReturnValue:
    """Show the sign-in form; check a name and password (or the admin token, name empty)."""
    if request.method == "GET":
        if g.operator is not None:
            return redirect(url_for("console.overview.index"))
        return render_template("console/signin.html", next=request.args.get("next", ""))
    current_app.extensions["csrf"].protect()
    s = settings()
    name = request.form.get("name", "").strip().lower()
    secret = request.form.get("password", "")
    address = request.remote_addr or "-"
    store = operators()
    if store.failures(name, address) >= s.CONSOLE_SIGNIN_LIMIT:
        log.warning("console.signin_limited", name=name or ADMIN_NAME, address=mask_address(address))
        minutes = max(1, s.CONSOLE_SIGNIN_WINDOW_S // 60)
        return _again(f"Too many failed sign-ins for this name from your address. Wait {minutes} minutes "
                      "and try again, or ask another operator.", 429)
    if name in ("", ADMIN_NAME):
        token = s.ADMIN_TOKEN or ""
        ok = bool(token) and hmac.compare_digest(secret.encode(), token.encode())
        name = ADMIN_NAME
    else:
        ok = store.verify(name, secret)
    if not ok:
        failures = store.count_failure(name, address, s.CONSOLE_SIGNIN_WINDOW_S)
        log.warning("console.signin_failed", name=name, address=mask_address(address), failures=failures)
        return _again("Wrong name or password.", 401)
    store.clear_failures(name, address)
    session.clear()  # a fresh session (and CSRF token) for the signed-in operator
    session["op"] = name
    session["at"] = int(time.time())
    session.permanent = True  # the cookie lives CONSOLE_SESSION_MINUTES
    log.info("console.signed_in", operator=name, address=mask_address(address))
    return redirect(safe_next(request.form.get("next")))


def _again(message: str, status: int) -> ResponseReturnValue:
    return render_template("console/signin.html", error=message, next=request.form.get("next", "")), status


@bp.post("/signout")
@login_required
def signout() -> ResponseReturnValue:
    """End the session."""
    log.info("console.signed_out", operator=g.operator)
    session.clear()
    flash("You are signed out.")
    return redirect(url_for("console.auth.signin"))
