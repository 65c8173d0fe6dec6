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

from bot.conversation.replies import BUSY_REPLY
from bot.conversation.turn import Turn
from bot.observability.metrics import MESSAGES

log = structlog.get_logger(__name__)


def shed(**fields: str) -> str:
    """Log and count one message turned away because the process is saturated; return the
    busy reply (the load-shed step, and REPLY_MODE=rest when its reply threads are taken)."""
    log.warning("message.shed", reason="busy", **fields)
    MESSAGES.labels(outcome="rejected", reason="busy").inc()
    return BUSY_REPLY


class LoadShedStep:
    """Hold one of `slots` model-call slots for the rest of the turn, or answer busy at once."""

    name = "load-shed"
    records = False
    reads: tuple[str, ...] = ()
    writes = ("answer.reply", "answer.reason", "answer.status")

    def __init__(self, slots: int) -> None:
        self.slots = threading.BoundedSemaphore(slots)

    def __call__(self, turn: Turn) -> None:
        if not self.slots.acquire(blocking=False):
            turn.settle(shed(), reason="busy", status="busy")
            return
        turn.finally_.append(self.slots.release)
