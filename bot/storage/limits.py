"""Per-user rate limit: how many messages a user sent in the current minute.

Key (bot/storage/keys.py): ``chat_rate:{+E164}``, a counter that expires one window after
the user's first message in it, so a quiet user costs nothing.
"""

from __future__ import annotations

import redis

from bot.storage.keys import RATE_PREFIX, user_key
from bot.storage.scripts import Scripts

#: The rate-limit window, in seconds.
WINDOW_S = 60


class RateCounter:
    """Counts each user's messages per window, atomically (one script, one round trip)."""

    def __init__(self, client: redis.Redis, window_s: int = WINDOW_S) -> None:
        self.window_s = window_s
        self.scripts = Scripts(client, "rate")

    def count(self, user: str) -> int:
        """Count one more message; return how many the user sent in this window (StoreUnavailable
        when Redis does not answer)."""
        return int(self.scripts.run("rate", {"rate": user_key(RATE_PREFIX, user)}, {"window": self.window_s}))
