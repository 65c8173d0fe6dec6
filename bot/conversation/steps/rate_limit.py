"""The rate-limit step: past RATE_LIMIT_PER_MINUTE messages in a minute, a user gets one
polite notice, then silence until the window passes.

Nothing past the limit reaches the model or the conversation (bot_messages_total
reason=rate_limited). It runs after `claim`, so a redelivery (answered by the claim) is never
counted, and after `command`, so a user's own reset, opt-out or "delete my data" (and its YES)
is never held back.
"""

from __future__ import annotations

import structlog

from bot.conversation.catalog import Catalog
from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.observability.metrics import MESSAGES
from bot.storage.limits import RateCounter

log = structlog.get_logger(__name__)

REASON = "rate_limited"


class RateLimitStep:
    """Answer at most `per_minute` messages per user per minute (0: no limit)."""

    name = "rate-limit"
    records = False
    reads = ("stored.claim", "heard.language")
    writes = ("answer.reply", "answer.reason", "answer.status")

    def __init__(self, counter: RateCounter, per_minute: int, catalog: Catalog) -> None:
        self.counter = counter
        self.per_minute = per_minute
        self.catalog = catalog

    def __call__(self, turn: Turn) -> None:
        if self.per_minute <= 0 or turn.stored.claim is None:  # no limit, or Redis down: answer (fail open)
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
        turn.settle(self.catalog.text("rate_limited", turn.heard.language) if notice else "", reason=REASON,
                    status=REASON)
