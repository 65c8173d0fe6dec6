"""The operator console: server-rendered pages under /console, on when ADMIN_TOKEN is set.

One blueprint per area, as Flask's tutorial (flaskr) has them: auth (sign-in, sign-out and
the session's operator), overview, users (the list and one user), actions (what an operator
changes on a user), handover (take over, hand back, reply), queues, knowledge (the knowledge
base's documents: list, upload, remove, try a search). They are nested in the
`console` blueprint, which holds the templates and static files and sets the security
headers on every response. Views are thin: they call the user operations of bot/users/
(the same as the CLI and the admin API) and the stores, with actor `console:<operator>`.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime, timedelta, timezone
from typing import Any

import structlog
from flask import Blueprint, Flask, Response, render_template, request
from flask_wtf.csrf import CSRFError, CSRFProtect

from bot.config import Settings
from bot.exceptions import ConfigError, StoreUnavailable
from bot.ops.console import actions, auth, handover, knowledge, overview, queues, reminders, tools, users
from bot.services import Services
from bot.storage.operators import OperatorStore

log = structlog.get_logger(__name__)

#: Every console response carries these (no inline script or style: the CSS and JS are files).
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",  # for browsers that predate frame-ancestors
}

#: The label the session key is derived under (a new label would sign every operator out).
SESSION_KEY_LABEL = b"whatsapp-bot console session v1"

bp = Blueprint("console", __name__, url_prefix="/console", template_folder="templates", static_folder="static")
for child in (auth.bp, overview.bp, users.bp, actions.bp, handover.bp, queues.bp, knowledge.bp, tools.bp, reminders.bp):
    bp.register_blueprint(child)


@bp.after_app_request
def security_headers(response: Response) -> Response:
    """Set the CSP, no-store and the other headers on every console response, a 404 of a
    console path included (it belongs to no blueprint)."""
    if request.path == "/console" or request.path.startswith("/console/"):
        response.headers.update(SECURITY_HEADERS)
    return response


@bp.errorhandler(CSRFError)
def csrf_refused(err: CSRFError) -> Any:
    """A POST without a valid CSRF token: 400, nothing changed."""
    log.warning("console.csrf_refused", route=request.url_rule.rule if request.url_rule else "unknown",
                reason=err.description)
    return render_template("console/error.html", title="Request refused",
                           message="The form had expired or did not come from this console. "
                                   "Nothing was changed: go back, reload the page and try again."), 400


@bp.errorhandler(StoreUnavailable)
def store_unavailable(_err: StoreUnavailable) -> Any:
    """Redis is down: say so on a page, don't crash."""
    return render_template("console/error.html", title="Redis is unavailable",
                           message="The console cannot reach Redis right now. Try again in a moment."), 503


@bp.errorhandler(404)
def not_found(_err: Exception) -> Any:
    """A console page that does not exist."""
    return render_template("console/error.html", title="Not found", message="There is no such page."), 404


def session_key(settings: Settings) -> bytes:
    """Return the key that signs the session cookie, derived from CONSOLE_SECRET (HMAC-SHA256
    of a fixed label); in development without it, from ADMIN_TOKEN, with a warning."""
    secret = settings.CONSOLE_SECRET
    if secret is None:
        if settings.APP_ENV == "production":
            raise ConfigError("CONSOLE_SECRET: required in production when ADMIN_TOKEN turns the console on "
                              "(the console's session cookie is signed with a key derived from it)")
        log.warning("console.secret_from_admin_token",
                    detail="set CONSOLE_SECRET; without it the session key is derived from ADMIN_TOKEN")
        secret = settings.ADMIN_TOKEN or ""
    return hmac.new(secret.encode(), SESSION_KEY_LABEL, hashlib.sha256).digest()


def init_console(app: Flask, services: Services, settings: Settings) -> None:
    """Mount the console on the app when ADMIN_TOKEN is set (else /console is a 404): the
    session cookie's settings, CSRF protection for the console's forms only, the blueprints."""
    if not settings.ADMIN_TOKEN:
        return
    app.config.update(
        SECRET_KEY=session_key(settings),
        SESSION_COOKIE_NAME="bot_console",
        SESSION_COOKIE_PATH="/console",  # the webhook and /admin never see it
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_SECURE=settings.APP_ENV != "development",
        PERMANENT_SESSION_LIFETIME=timedelta(minutes=settings.CONSOLE_SESSION_MINUTES),
        # Only the console's views check tokens (auth.login_required): the webhook, the status
        # callback and the Bearer /admin API take no CSRF token.
        WTF_CSRF_CHECK_DEFAULT=False,
        WTF_CSRF_TIME_LIMIT=settings.CONSOLE_SESSION_MINUTES * 60,
        # The strict check wants a Referer on HTTPS; our Referrer-Policy sends none. The token
        # and the SameSite=Strict cookie are the defence.
        WTF_CSRF_SSL_STRICT=False,
    )
    CSRFProtect(app)
    app.extensions["bot.operators"] = OperatorStore(services.redis)
    app.jinja_env.filters["when"] = when
    app.jinja_env.filters["ago"] = ago
    app.jinja_env.filters["usd"] = usd
    app.register_blueprint(bp)


def when(ts: float | None) -> str:
    """Show a Unix time as 2025-05-01 14:03 UTC."""
    if not ts:
        return "never"
    return datetime.fromtimestamp(float(ts), timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def ago(ts: float | None, now: float | None = None) -> str:
    """Show how long ago a Unix time was: 40 s, 5 min, 3 h, 2 d."""
    if not ts:
        return "never"
    seconds = max(0, int((now or datetime.now(timezone.utc).timestamp()) - float(ts)))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def usd(value: float | None) -> str:
    """Show a cost in US dollars; a dash when there is no price."""
    if value is None:
        return "–"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"
