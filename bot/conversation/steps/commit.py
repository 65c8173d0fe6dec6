"""The commit step: record the outcome in one atomic script (the reply for redeliveries, the
valid pair, the usage, what inspect shows); a Redis failure degrades to answering without
storing."""

from __future__ import annotations

import structlog

from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.observability.metrics import PENDING_DROPPED
from bot.storage.context import CommitRecord, ContextStore
from bot.storage.records import STORED_TEXT_CHARS, clip

log = structlog.get_logger(__name__)


class CommitStep:
    """Record the outcome atomically; a Redis failure degrades to answering without storing."""

    name = "commit"
    records = True
    reads = ("stored.claim", "answer.reply", "heard.reply_prefix", "record.pair", "record.touch_context",
             "answer.completion", "found.task_completion", "heard.transcript", "found.task",
             "found.reference_trace", "answer.status", "heard.told", "answer.tool_rounds")
    writes = ("record.result", "answer.status")

    def __init__(self, store: ContextStore) -> None:
        self.store = store

    def __call__(self, turn: Turn) -> None:
        claim = turn.stored.claim
        if claim is None:
            return
        msg, task = turn.msg, turn.found.task
        record = CommitRecord(
            user=msg.user, claim=claim, sid=msg.sid, reply=turn.final_reply(), pair=turn.record.pair,
            touch_context=turn.record.touch_context, usage=turn.usage(),
            last_task=clip(task.task, STORED_TEXT_CHARS) if task else None, to=msg.to,
            last_reference=turn.found.reference_trace, language=turn.heard.told,
        )
        try:
            result = self.store.commit(record)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="commit", error=str(err))
            if turn.answer.status == "answered":
                turn.answer.status = "degraded"
            return
        turn.record.result = result
        if record.pair is not None and not result.pair_stored:
            log.info("pair.discarded", reason="reset_or_takeover")
        if result.dropped:  # the last resort (PENDING_MAX_BYTES): workers down, or a runaway client
            PENDING_DROPPED.inc(result.dropped)
            log.warning("summary.pending_dropped", dropped=result.dropped)
