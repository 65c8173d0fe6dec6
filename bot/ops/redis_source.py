"""Which Redis a `whatsapp-bot` command reads: the bot's, or none (docs/operating.md).

REDIS_URL comes from the environment, then .env, then .run/dev.env (which a running `make
run` writes, and removes when it stops). With none of them, in a checkout where `make run`
keeps its data (`.run/redis`), the command starts the development Redis on that data for its
own run, and stops it (saving) at the end: `users`, `kb list` and `kb add` read and write the
bot's data whether `make run` runs or not. A `.run/dev.env` left by a `make run` that was
killed counts as stopped. Anywhere else the command refuses and says how to start the bot:
it never falls through to whatever answers on 127.0.0.1:6379.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import redis

from bot.config import lookup

#: Where `make run` keeps its Redis's data (bot/dev/runner.py).
DEV_DATA = Path(".run") / "redis"
NOT_RUNNING = ("no REDIS_URL here, and no bot's data: start the bot with `make run` (or set REDIS_URL, "
               "in the environment or .env, to the bot's Redis)")


@dataclass
class RedisChoice:
    """The Redis a command uses, where that came from, and how to let it go."""

    url: str | None  # None: refused (see `refusal`)
    source: str
    refusal: str = ""
    stop: Callable[[], None] = field(default=lambda: None)


def _answers(url: str) -> bool:
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except (redis.RedisError, ValueError):
        return False


def _development_redis(why: str) -> RedisChoice:
    """Start the development Redis on `make run`'s data for this command."""
    try:
        from bot.dev.embedded import start_redis_server
    except ImportError:  # a production install: no embedded Redis to start
        return RedisChoice(None, "", refusal=NOT_RUNNING)
    server: Any = start_redis_server(DEV_DATA.resolve(), unix=True, persist=True)
    return RedisChoice(server.url, f"{why}: the development Redis on {DEV_DATA}, started for this command",
                       stop=server.stop)


def choose_redis() -> RedisChoice:
    """Return the Redis this command is to use (see the module)."""
    found = lookup("REDIS_URL")
    if found is not None:
        url, source = found
        if source == ".run/dev.env" and not _answers(url) and DEV_DATA.is_dir():
            return _development_redis("make run is stopped (.run/dev.env was left behind)")
        return RedisChoice(url, f"from {source}")
    if DEV_DATA.is_dir():
        return _development_redis("make run is stopped")
    return RedisChoice(None, "", refusal=NOT_RUNNING)
