"""Liveness and readiness probes for the process manager and load balancer."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify
from flask.typing import ResponseReturnValue

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> ResponseReturnValue:
    """Say the process is alive."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz() -> ResponseReturnValue:
    """Say whether Redis answers; 503 when it does not."""
    if current_app.extensions["bot.store"].ping():
        return jsonify(status="ready", redis="ok")
    return jsonify(status="unavailable", redis="unreachable"), 503
