"""The judge step: settle the reply, and decide whether the exchange is valid context
(docs/conversation.md): fallbacks, errors, refusals and very short exchanges are answered
but never stored."""

from __future__ import annotations

import time

import structlog

from bot.conversation import filtering
from bot.conversation.catalog import Catalog
from bot.conversation.turn import Turn
from bot.observability.metrics import MESSAGES
from bot.storage.records import STORED_TEXT_CHARS, Pair, clip

log = structlog.get_logger(__name__)


class JudgeStep:
    """Settle the reply, and keep the exchange as a pair when it is valid context."""

    name = "judge"
    records = False
    reads = ("stored.claim", "answer.completion", "answer.prompt", "heard.text", "heard.stored_text",
             "heard.language")
    writes = ("record.pair", "answer.reply", "answer.reason", "answer.status")

    def __init__(self, min_chars: int, rephrase_phrases: tuple[str, ...], catalog: Catalog) -> None:
        self.min_chars = min_chars  # MIN_PAIR_CHARS
        self.rephrase_phrases = rephrase_phrases
        self.catalog = catalog

    def __call__(self, turn: Turn) -> None:
        completion = turn.answer.completion
        fallback = self.catalog.text("fallback", turn.heard.language)
        if turn.stored.claim is None:  # Redis down: answer, but nothing is judged or stored
            if completion is None:
                turn.settle(fallback, reason=filtering.REASON_MODEL_ERROR)
            else:
                turn.settle(completion.text or fallback)
            return
        if completion is None:
            log.info("pair.rejected", reason=filtering.REASON_MODEL_ERROR)
            MESSAGES.labels(outcome="rejected", reason=filtering.REASON_MODEL_ERROR).inc()
            turn.settle(fallback, reason=filtering.REASON_MODEL_ERROR, status="degraded")
            return
        text, prompt = turn.heard.text, turn.answer.prompt
        assert text is not None and prompt is not None
        verdict = filtering.judge_pair(
            text,
            completion.text,
            completion.finish_reason,
            min_chars=self.min_chars,
            rephrase_phrases=self.rephrase_phrases,
        )
        if verdict.valid:
            turn.record.pair = Pair(
                user=clip(turn.heard.stored_text or text, STORED_TEXT_CHARS),
                assistant=clip(completion.text, STORED_TEXT_CHARS),
                ts=time.time(),
                sid=turn.msg.sid,
            )
            log.info("pair.accepted", prompt_tokens=prompt.tokens)
            MESSAGES.labels(outcome="accepted", reason=verdict.reason).inc()
        else:
            log.info("pair.rejected", reason=verdict.reason)
            MESSAGES.labels(outcome="rejected", reason=verdict.reason).inc()
        turn.settle(completion.text or fallback, reason=verdict.reason)
