"""What every console view needs: the app's collaborators, the operator as an actor, the user
named in the path."""

from __future__ import annotations

import ipaddress

from flask import abort, current_app, g, redirect, url_for
from werkzeug.wrappers import Response

from bot.config import E164, Settings
from bot.services import Services
from bot.storage.operators import OperatorStore


def services() -> Services:
    """Return the app's services."""
    return current_app.extensions["bot.services"]  # type: ignore[no-any-return]


def settings() -> Settings:
    """Return the app's settings."""
    return current_app.config["BOT_SETTINGS"]  # type: ignore[no-any-return]


def operators() -> OperatorStore:
    """Return the operator accounts."""
    return current_app.extensions["bot.operators"]  # type: ignore[no-any-return]


def actor() -> str:
    """Return who acts, for audit lines and a person's messages: console:<operator>."""
    return f"console:{g.operator}"


def user_or_404(e164: str) -> str:
    """Return the user named in the path, or 404 when it is not a +E164 number."""
    if not E164.match(e164):
        abort(404)
    return e164


def to_user(user: str, anchor: str = "") -> Response:
    """Redirect to one user's page (at a section, when given)."""
    return redirect(url_for("console.users.user", e164=user) + (f"#{anchor}" if anchor else ""))


def mask_address(address: str | None) -> str:
    """Mask a client address for logs: 203.0.113.x, 2001:db8:85a3:…"""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return "-"
    if ip.version == 4:
        return ".".join(str(ip).split(".")[:3]) + ".x"
    return ":".join(ip.exploded.split(":")[:3]) + ":…"
