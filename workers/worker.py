"""The RQ worker class the Procfile runs: RQ's forking Worker, warmed up once.

Each job runs in a forked child. Without warming, every child would build the model
client and load the tiktoken encoding afresh (about a second); built once in the parent,
the children inherit them. Redis connection pools reset themselves after a fork.
"""

from __future__ import annotations

from typing import Any

from rq.worker import Worker

from workers import jobs


class BotWorker(Worker):
    """RQ's Worker with the job collaborators built before the first fork."""

    def work(self, *args: Any, **kwargs: Any) -> bool:
        """Warm up, then work as RQ does."""
        jobs.services()
        return super().work(*args, **kwargs)
