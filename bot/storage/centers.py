"""The middle of each embedding model's space (and what each category of fact is about,
relative to it), one key per model (bot/storage/keys.py CENTER_PREFIX), shared by every
process: the facts' 1-bit vectors are kept relative to it (bot/memory/vectors.py), so all
writers and readers must use the same one.
"""

from __future__ import annotations

import base64

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import CENTER_PREFIX
from bot.storage.records import text


class CenterStore:
    """Read and write each model's center; Redis errors become StoreUnavailable."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def get(self, model: str) -> bytes | None:
        """Return the model's center (float32 bytes), or None before the first fact's vector."""
        try:
            raw = self.client.get(f"{CENTER_PREFIX}{model}")
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        if raw is None:
            return None
        try:
            return base64.b64decode(text(raw), validate=True)
        except ValueError:
            return None

    def put(self, model: str, vector: bytes) -> bytes:
        """Store the model's center unless one is stored already; return the one that stands."""
        key = f"{CENTER_PREFIX}{model}"
        try:
            self.client.set(key, base64.b64encode(vector).decode("ascii"), nx=True)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return self.get(model) or vector
