"""What the admin API's blueprints share (docs/operating.md): the bearer token, the services,
JSON bodies and their fields, and errors answered as JSON."""

from __future__ import annotations

import hmac

import structlog
from flask import Blueprint, abort, current_app, jsonify, request
from flask.typing import ResponseReturnValue

from bot.config import E164
from bot.exceptions import StoreUnavailable
from bot.services import Services

log = structlog.get_logger(__name__)


def guard(bp: Blueprint) -> None:
    """Put a blueprint behind ADMIN_TOKEN, with Redis outages and bad requests as JSON."""
    bp.before_request(require_token)
    bp.register_error_handler(StoreUnavailable, store_unavailable)
    bp.register_error_handler(400, bad_request)


def require_token() -> ResponseReturnValue | None:
    """404 when no ADMIN_TOKEN is configured; 401 unless the bearer token matches."""
    token = current_app.config["BOT_SETTINGS"].ADMIN_TOKEN
    if not token:
        abort(404)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        rule = request.url_rule.rule if request.url_rule else "unknown"
        log.warning("admin.unauthorized", route=rule)  # the route, not the path: no numbers
        return jsonify(error="unauthorized"), 401, {"WWW-Authenticate": "Bearer"}
    return None


def store_unavailable(_err: StoreUnavailable) -> ResponseReturnValue:
    """Redis is down: say so, don't crash."""
    return jsonify(error="redis unavailable"), 503


def bad_request(err) -> ResponseReturnValue:  # type: ignore[no-untyped-def]
    """Answer 400s as JSON."""
    return jsonify(error=getattr(err, "description", "bad request")), 400


def services() -> Services:
    """Return the app's services."""
    return current_app.extensions["bot.services"]  # type: ignore[no-any-return]


def user_param(e164: str) -> str:
    """Return the +E164 of the path, or 400."""
    if not E164.match(e164):
        abort(400, description="user must be +E164, e.g. +14155550100")
    return e164


def json_body() -> dict:  # type: ignore[type-arg]
    """Return the request's JSON object, or 400."""
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        abort(400, description="expected a JSON object body")
    return data


def json_flag(name: str) -> bool:
    """Return the true-or-false field `name` of the JSON body; 400 when it is anything else."""
    value = json_body().get(name)
    if not isinstance(value, bool):
        abort(400, description=f"{name} must be true or false")
    return value
