"""The claim step: claim the MessageSid and load the user's context in one round trip; a
redelivery gets the first attempt's reply, a message still in flight waits for it."""

from __future__ import annotations

import time
from typing import Callable

import structlog

from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.storage.context import Claim, ContextStore

log = structlog.get_logger(__name__)

#: How often a redelivery polls for the first attempt's answer while it is in flight.
INFLIGHT_POLL_S = 0.2


class ClaimStep:
    """Claim the MessageSid and load the user's context; a redelivery gets the first reply."""

    name = "claim"
    records = False
    reads: tuple[str, ...] = ()
    writes = ("stored.claim", "stored.context", "stored.read_along", "answer.reply", "answer.status")

    def __init__(
        self,
        store: ContextStore,
        wait_s: float,
        redis_worst_s: float,
        sleep: Callable[[float], None] = time.sleep,
        also: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.store = store
        self.also = also  # hash fields later steps need, read in the claim's round trip
        self.wait_s = wait_s  # DEDUP_WAIT_S
        self.redis_worst_s = redis_worst_s
        self.sleep = sleep

    def __call__(self, turn: Turn) -> None:
        # Wait for a first attempt in flight at most DEDUP_WAIT_S, and never past the point
        # where one more poll could outlast the deadline.
        wait = min(self.wait_s, turn.remaining() - self.redis_worst_s)
        try:
            claim = self._claim(turn.msg.user, turn.msg.sid, wait, turn.claim_token)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="claim", error=str(err))
            turn.answer.status = "degraded"  # answer from the message alone; nothing is remembered
            return
        if claim.status == "duplicate":
            # Inside Twilio's retry horizon the user may never have had the reply: send it
            # again. Later they have: an empty answer, so nothing is sent twice.
            log.info("message.duplicate", replayed=claim.reply is not None, age_s=claim.age_s)
            turn.settle(claim.reply or "", status="duplicate")
            turn.stopped = True
        elif claim.status == "inflight":
            log.warning("message.inflight_timeout")
            turn.settle("", status="inflight")
            turn.stopped = True
        else:
            turn.stored.claim, turn.stored.context = claim, claim.context
            turn.stored.read_along = dict(zip(self.also, claim.also))

    def _claim(self, user: str, sid: str, wait_s: float, token: str | None) -> Claim:
        """Claim the MessageSid, waiting up to wait_s if a first attempt is in flight."""
        deadline = time.monotonic() + wait_s
        claim = self.store.claim(user, sid, also=self.also, token=token)
        while claim.status == "inflight" and time.monotonic() < deadline:
            self.sleep(INFLIGHT_POLL_S)
            claim = self.store.claim(user, sid, also=self.also, token=token)
        return claim
