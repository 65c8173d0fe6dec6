"""Operator HTTP API under /admin, behind `Authorization: Bearer $ADMIN_TOKEN`."""

from __future__ import annotations

import hmac
import re

import structlog
from flask import Blueprint, abort, current_app, jsonify, request
from flask.typing import ResponseReturnValue

from bot.conversation import reset_conversation
from bot.exceptions import StoreUnavailable

log = structlog.get_logger(__name__)

bp = Blueprint("admin", __name__, url_prefix="/admin")

_E164 = re.compile(r"^\+[1-9]\d{6,14}$")


@bp.before_request
def require_token() -> ResponseReturnValue | None:
    """404 when no ADMIN_TOKEN is configured; 401 unless the bearer token matches."""
    token = current_app.config["BOT_SETTINGS"].ADMIN_TOKEN
    if not token:
        abort(404)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        log.warning("admin.unauthorized", path=request.path)
        return jsonify(error="unauthorized"), 401, {"WWW-Authenticate": "Bearer"}
    return None


def _user(e164: str) -> str:
    if not _E164.match(e164):
        abort(400, description="user must be +E164, e.g. +14155550100")
    return e164


@bp.post("/users/<e164>/reset")
def reset_user(e164: str) -> ResponseReturnValue:
    """Clear one user's conversation (not their facts)."""
    user = _user(e164)
    try:
        existed = reset_conversation(current_app.extensions["bot.store"], user, "admin_api", via="admin_api")
    except StoreUnavailable:
        return jsonify(error="redis unavailable"), 503
    return jsonify(user=user, reset=True, existed=existed)
