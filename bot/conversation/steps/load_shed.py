"""The load-shed step: a process is saturated when MODEL_CONCURRENCY model calls are in
flight in it; a message that finds it so gets the polite busy reply at once (reason=busy)
instead of waiting behind the others.

MODEL_CONCURRENCY stays below the web threads (WEB_THREADS), so threads are always left to
give that answer at once. It runs right before `model`: commands and redeliveries are never
shed.
"""

from __future__ import annotations

import threading

import structlog

from bot.conversation.catalog import Catalog
from bot.conversation.turn import Turn
from bot.observability.metrics import MESSAGES

log = structlog.get_logger(__name__)


def shed(**fields: str) -> None:
    """Log and count one message turned away because the process is saturated (the load-shed
    step, and REPLY_MODE=rest when its reply threads are taken); the caller answers "busy"."""
    log.warning("message.shed", reason="busy", **fields)
    MESSAGES.labels(outcome="rejected", reason="busy").inc()


class LoadShedStep:
    """Hold one of `slots` model-call slots for the rest of the turn, or answer busy at once."""

    name = "load-shed"
    records = False
    reads = ("heard.language",)
    writes = ("answer.reply", "answer.reason", "answer.status")

    def __init__(self, slots: int, catalog: Catalog) -> None:
        self.slots = threading.BoundedSemaphore(slots)
        self.catalog = catalog

    def __call__(self, turn: Turn) -> None:
        if not self.slots.acquire(blocking=False):
            shed()
            turn.settle(self.catalog.text("busy", turn.heard.language), reason="busy", status="busy")
            return
        turn.finally_.append(self.slots.release)
