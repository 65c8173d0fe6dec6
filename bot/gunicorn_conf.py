"""gunicorn's settings for the Procfile's `web` line (`-c python:bot.gunicorn_conf`).

Each worker process builds the openai SDK's clients once the app is loaded, before its
first request: they are built lazily (bot/llm/sdk.py), and the first message each process
answered used to pay for loading the SDK, about 2 s on a busy host (docs/semantic.md, Speed).
"""

from __future__ import annotations

from typing import Any


def post_worker_init(worker: Any) -> None:
    """Build every SDK client the app made, before the worker takes requests."""
    from bot.llm.sdk import build_all

    build_all()
