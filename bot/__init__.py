"""WhatsApp GPT bot: a Twilio webhook that answers from compact per-user Redis context.

The package is layered; README's Layout section draws it. `create_app` (bot/app.py) is
imported lazily here, so importing any one layer does not pull in the whole app.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

# One BLAS thread per process, set before numpy loads OpenBLAS: a message's dense search is
# one small matrix product, and OpenBLAS's threads on top of gunicorn's and RQ's cost a
# message 6 ms at p50 on a busy 2-core host (docs/semantic.md, Speed). An operator's own
# value wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

if TYPE_CHECKING:
    from flask import Flask


def create_app(*args: Any, **kwargs: Any) -> "Flask":
    """Build the Flask app (gunicorn calls `bot:create_app()`); see bot.app.create_app."""
    from bot.app import create_app as factory

    return factory(*args, **kwargs)


__all__ = ["create_app"]
