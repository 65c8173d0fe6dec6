"""The actions step: keep the write the reply proposes for the user's yes, and add the turn's
tool calls to the user's log (docs/tools.md). It records, so it runs after a settled reply too."""

from __future__ import annotations

import time

import structlog

from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.storage.actions import ActionStore

log = structlog.get_logger(__name__)


class ActionsStep:
    """Store the proposal the reply asks about, and log the turn's tool calls."""

    name = "actions"
    records = True
    reads = ("stored.claim", "answer.proposal", "answer.tool_calls", "record.result")
    writes: tuple[str, ...] = ()

    def __init__(self, actions: ActionStore) -> None:
        self.actions = actions

    def __call__(self, turn: Turn) -> None:
        if turn.stored.claim is None or turn.record.result is None:  # nothing was committed: nothing proposed
            return
        user = turn.msg.user
        try:
            if turn.answer.proposal is not None:
                # Proposed now, after the user's message arrived: only a later message can confirm it.
                self.actions.propose(user, {**turn.answer.proposal, "sid": turn.msg.sid, "at": time.time()})
                log.info("tools.proposed", tool=turn.answer.proposal.get("tool"))
            self.actions.log_calls(user, turn.answer.tool_calls)
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="actions", error=str(err))
