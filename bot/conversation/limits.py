"""Limits on the message path.

- Rate limit: past RATE_LIMIT_PER_MINUTE messages in a minute, a user gets one polite
  notice, then silence until the window passes. Nothing past the limit reaches the model or
  the conversation (bot_messages_total reason=rate_limited). It runs after `claim`, so a
  redelivery (answered by the claim) is never counted, and after `command`, so a user's own
  reset, opt-out or "delete my data" (and its YES) is never held back.
- Load shedding: a process is saturated when MODEL_CONCURRENCY model calls are in flight in
  it. A message that finds it so gets the polite busy reply at once (reason=busy), instead of
  waiting behind the others. MODEL_CONCURRENCY stays below the web threads (WEB_THREADS), so
  threads are always left to give that answer at once. It runs right before `model`: commands
  and redeliveries are never shed.
"""

from __future__ import annotations

import threading

import structlog

from bot.conversation.pipeline import Turn
from bot.conversation.replies import BUSY_REPLY, RATE_LIMITED_REPLY
from bot.exceptions import StoreUnavailable
from bot.observability.metrics import MESSAGES
from bot.storage.limits import RateCounter

log = structlog.get_logger(__name__)

REASON = "rate_limited"


class RateLimitStep:
    """Answer at most `per_minute` messages per user per minute (0: no limit)."""

    name = "rate-limit"
    records = False

    def __init__(self, counter: RateCounter, per_minute: int) -> None:
        self.counter = counter
        self.per_minute = per_minute

    def __call__(self, turn: Turn) -> None:
        if self.per_minute <= 0 or turn.claim is None:  # no limit, or Redis down: answer (fail open)
            return
        try:
            sent = self.counter.count(turn.msg.user)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="rate_limit", error=str(err))
            return
        if sent <= self.per_minute:
            return
        notice = sent == self.per_minute + 1  # the first one past the limit; then silence
        log.info("message.rate_limited", sent=sent, limit=self.per_minute, notice=notice)
        MESSAGES.labels(outcome="rejected", reason=REASON).inc()
        turn.settle(RATE_LIMITED_REPLY if notice else "", reason=REASON, status=REASON)


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

    def __init__(self, slots: int) -> None:
        self.slots = threading.BoundedSemaphore(slots)

    def __call__(self, turn: Turn) -> None:
        if not self.slots.acquire(blocking=False):
            turn.settle(shed(), reason="busy", status="busy")
            return
        turn.finally_.append(self.slots.release)
