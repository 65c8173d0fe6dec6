"""Liveness, readiness and metrics for the process manager, load balancer and Prometheus."""

from __future__ import annotations

from flask import Blueprint, Response, current_app, jsonify
from flask.typing import ResponseReturnValue

from bot.observability import metrics

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> ResponseReturnValue:
    """Say the process is alive."""
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz() -> ResponseReturnValue:
    """Say whether Redis answers; 503 when it does not."""
    if current_app.extensions["bot.services"].store.ping():
        return jsonify(status="ready", redis="ok")
    return jsonify(status="unavailable", redis="unreachable"), 503


@bp.get("/metrics")
def prometheus() -> ResponseReturnValue:
    """Expose Prometheus metrics, queue depth read at scrape time."""
    body, content_type = metrics.render(current_app.extensions["bot.services"].jobs.depth)
    return Response(body, content_type=content_type)
