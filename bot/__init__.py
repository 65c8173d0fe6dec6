"""WhatsApp GPT bot: a Twilio webhook that answers from compact per-user Redis context.

The package is layered; README's Layout section draws it. `create_app` (bot/app.py) is
imported lazily here, so importing any one layer does not pull in the whole app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flask import Flask


def create_app(*args: Any, **kwargs: Any) -> "Flask":
    """Build the Flask app (gunicorn calls `bot:create_app()`); see bot.app.create_app."""
    from bot.app import create_app as factory

    return factory(*args, **kwargs)


__all__ = ["create_app"]
