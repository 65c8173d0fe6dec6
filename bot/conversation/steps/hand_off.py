"""The hand-off step: queue the background jobs the commit made due (a summary, fact
extraction), postpone extraction while the user is still writing, and summarize everything
before a topic shift now (docs/conversation.md)."""

from __future__ import annotations

import structlog

from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.jobs.handoff import hand_off, postpone_extraction
from bot.jobs.queue import JobQueue
from bot.storage.context import CommitResult, ContextStore
from bot.storage.triggers import EXTRACTION, SUMMARY

log = structlog.get_logger(__name__)


class HandOffStep:
    """Queue the background jobs the commit made due, and a topic shift's summary."""

    name = "hand-off"
    records = True
    reads = ("stored.claim", "record.result", "found.topic_shift")
    writes: tuple[str, ...] = ()

    def __init__(self, store: ContextStore, jobs: JobQueue | None, extraction_max_pairs: int = 0) -> None:
        self.store = store
        self.jobs = jobs
        self.extraction_max_pairs = extraction_max_pairs  # 0: never postpone

    def __call__(self, turn: Turn) -> None:
        if turn.stored.claim is None:
            return
        user, result = turn.msg.user, turn.record.result
        if result is not None:
            for kind, token in result.due.items():
                self._enqueue(kind, user, token)
            if self.jobs is not None and result.pair_stored and EXTRACTION not in result.due:
                # a burst: pending pairs past the early-summary mark read now, not after the pause
                hurry = result.pending_bytes >= self.store.policy.soft_bytes
                postpone_extraction(self.jobs, user, turn.stored.memory.meta, result.seq, self.extraction_max_pairs,
                                    hurry=hurry)
        if turn.found.topic_shift:
            self._summarize_now(user, result)

    def _enqueue(self, kind: str, user: str, token: str, **kwargs: object) -> None:
        if self.jobs is not None:
            hand_off(self.jobs, self.store, kind, user, token, **kwargs)

    def _summarize_now(self, user: str, commit: CommitResult | None) -> None:
        """Compress everything before a topic shift into the summary, now.

        The topic job takes the trigger even from a queued job (whose result is then
        discarded), so the old topic never stays verbatim in the recent window.
        """
        upto = 0 if commit is None else commit.seq - 1 if commit.pair_stored else commit.seq
        if upto <= 0:
            log.info("topic.shift", summary_queued=False)
            return
        try:
            token = self.store.take_trigger(user, SUMMARY)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="topic_shift", error=str(err))
            return
        log.info("topic.shift", summary_queued=True)
        self._enqueue(SUMMARY, user, token, clear_recent=True, upto=upto)
