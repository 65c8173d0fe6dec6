"""gunicorn's settings for the Procfile's `web` line (`-c python:bot.gunicorn_conf`).

Each worker process builds the openai SDK's clients once the app is loaded, before its
first request: they are built lazily (bot/llm/sdk.py), and the first message each process
answered used to pay for loading the SDK, about 2 s on a busy host (docs/semantic.md, Speed).
Then it freezes what start-up loaded out of the garbage collector's sight: a full collection
scanned it all, about 100 ms with every thread stopped (docs/scaling.md, Pauses).
"""

from __future__ import annotations

import gc
from typing import Any


def post_worker_init(worker: Any) -> None:
    """Build every SDK client the app made, before the worker takes requests."""
    from bot.llm.sdk import build_all
    from bot.observability.metrics import time_gc

    build_all()
    time_gc()
    gc.freeze()
