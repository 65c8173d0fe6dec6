"""The steps of the message path, in the order they run (see pipeline.py).

Each step is a small class: built once with its collaborators, then called with a Turn.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable

import structlog

from bot.config import Settings
from bot.conversation import filtering
from bot.conversation.pipeline import Turn
from bot.conversation.prompt import BuiltPrompt, build_prompt
from bot.conversation.task import SAFETY_CATEGORIES
from bot.conversation.replies import FALLBACK_REPLY
from bot.exceptions import LLMUnavailable, StoreUnavailable
from bot.jobs.handoff import hand_off, postpone_extraction
from bot.jobs.queue import JobQueue
from bot.llm.client import LLMClient
from bot.llm.prompts import Prompt
from bot.llm.tokens import TokenCounter
from bot.memory.selection import MemorySelection, select_memory
from bot.memory.vectors import FactVectors
from bot.observability.metrics import MESSAGES
from bot.storage.context import Claim, CommitResult, Context, ContextStore
from bot.storage.facts import FactStore
from bot.storage.records import STORED_TEXT_CHARS, Fact, Pair, clip, decode_facts
from bot.storage.triggers import EXTRACTION, SUMMARY
from bot.storage.usage import usage_fields

log = structlog.get_logger(__name__)

#: How often a redelivery polls for the first attempt's answer while it is in flight.
INFLIGHT_POLL_S = 0.2


class ClaimStep:
    """Claim the MessageSid and load the user's context; a redelivery gets the first reply."""

    name = "claim"
    records = False

    def __init__(
        self,
        store: ContextStore,
        settings: Settings,
        sleep: Callable[[float], None] = time.sleep,
        also: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.store = store
        self.also = also  # hash fields later steps need, read in the claim's round trip
        self.wait_s = settings.DEDUP_WAIT_S
        self.redis_worst_s = settings.redis_worst_s
        self.sleep = sleep

    def __call__(self, turn: Turn) -> None:
        # Wait for a first attempt in flight at most DEDUP_WAIT_S, and never past the point
        # where one more poll could outlast the deadline.
        wait = min(self.wait_s, turn.remaining() - self.redis_worst_s)
        try:
            claim = self._claim(turn.msg.user, turn.msg.sid, wait, turn.claim_token)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="claim", error=str(err))
            turn.status = "degraded"  # answer from the message alone; nothing is remembered
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
            turn.claim, turn.context = claim, claim.context
            turn.read_along = dict(zip(self.also, claim.also))

    def _claim(self, user: str, sid: str, wait_s: float, token: str | None) -> Claim:
        """Claim the MessageSid, waiting up to wait_s if a first attempt is in flight."""
        deadline = time.monotonic() + wait_s
        claim = self.store.claim(user, sid, also=self.also, token=token)
        while claim.status == "inflight" and time.monotonic() < deadline:
            self.sleep(INFLIGHT_POLL_S)
            claim = self.store.claim(user, sid, also=self.also, token=token)
        return claim


class MemoryStep:
    """Select the user's facts for this message and render the read-only memory block."""

    name = "memory"
    records = False

    def __init__(
        self, settings: Settings, facts: FactStore | None, counter: TokenCounter, vectors: FactVectors | None = None
    ) -> None:
        self.settings = settings
        self.facts = facts
        self.counter = counter
        self.vectors = vectors  # facts by meaning (docs/semantic.md); None: by category

    def __call__(self, turn: Turn) -> None:
        if self.facts is None or turn.claim is None or turn.text is None:
            return
        scoped = {"session": decode_facts(turn.memory.session_facts), "user": decode_facts(turn.memory.facts)}
        try:
            scoped["org"] = self.facts.org_facts()
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="org_facts", error=str(err))
        if not any(scoped.values()):
            return
        similarity = self._similarity(turn, {k: f.category for k, f in scoped["user"].items()})
        selection = self._select(scoped, turn, similarity)
        if turn.task is not None and not turn.task.depends_on_user_memory:
            # the task needs no memory: only what keeps the user safe goes in
            safe = {scope: {k: f for k, f in facts.items() if f.category in SAFETY_CATEGORIES}
                    for scope, facts in scoped.items()}
            full, selection = selection, self._select(safe, turn, similarity)
            turn.prompt_tokens_saved += full.tokens - selection.tokens
        log.debug("memory.selected", facts=len(selection.selected), dropped=len(selection.dropped), tokens=selection.tokens,
                  by_meaning=similarity is not None)
        turn.memory_block = selection.block

    def _similarity(self, turn: Turn, categories: dict[str, str]) -> dict[str, float] | None:
        """Return each fact's similarity to the message, or None (no vectors: by category)."""
        stored = turn.memory.vectors
        if self.vectors is None or turn.vector is None or not stored:
            return None
        query = turn.vector.get()
        if query is None:
            return None
        try:
            return self.vectors.similarities(query, stored, categories) or None
        except StoreUnavailable as err:  # the model's center could not be read: by category, this once
            log.warning("store.unavailable", stage="memory_center", error=str(err))
            return None

    def _select(self, scoped: dict[str, dict[str, Fact]], turn: Turn,
                similarity: dict[str, float] | None = None) -> MemorySelection:
        assert turn.text is not None
        return select_memory(
            scoped,
            turn.text,
            self.counter,
            threshold=self.settings.EXTRACTION_CONFIDENCE,
            conflict_margin=self.settings.CONFLICT_MARGIN,
            max_tokens=self.settings.MEMORY_MAX_TOKENS,
            matches=turn.entity_matches,
            entities=turn.entities,
            related_weight=self.settings.ENTITY_RELATED_WEIGHT,
            similarity=similarity,
        )


class PromptStep:
    """Build the reply prompt from the context, the memory block and the message, in budget."""

    name = "prompt"
    records = False

    def __init__(
        self, settings: Settings, counter: TokenCounter, system_prompt: Prompt, knowledge_rules: Prompt | None = None
    ) -> None:
        self.settings = settings
        self.counter = counter
        self.system_prompt = system_prompt
        self.full_history = settings.CONTEXT_STRATEGY == "full_history"
        # While the knowledge base holds documents: how to use the reference, and what to say
        # when it does not cover a question about the business.
        self.with_rules = system_with_knowledge(system_prompt, knowledge_rules, settings.KNOWLEDGE_UNKNOWN_REPLY)

    def __call__(self, turn: Turn) -> None:
        assert turn.text is not None
        unbounded = self.full_history and turn.claim is not None  # the baseline keeps everything

        system = self.with_rules if turn.knowledge_rules else self.system_prompt.text

        def build(context: Context) -> BuiltPrompt:
            return build_prompt(
                system,
                context,
                turn.text or "",
                self.counter,
                max_tokens=None if unbounded else self.settings.MAX_PROMPT_TOKENS,
                max_user_tokens=self.settings.MAX_USER_MESSAGE_TOKENS,
                memory_block=turn.memory_block,
                resolved_task=resolved(turn),
                image=turn.image,
                reference=turn.reference,
            )

        prompt = build(turn.context)
        if turn.task is not None and not turn.task.depends_on_chat_history:
            # the task needs no history: the summary and the recent pairs stay out
            full, prompt = prompt, build(replace(turn.context, summary="", recent=[]))
            turn.prompt_tokens_saved += full.tokens - prompt.tokens
        turn.prompt = prompt
        log.debug(
            "prompt.built",
            tokens=prompt.tokens,
            pairs_used=prompt.pairs_used,
            pairs_dropped=prompt.pairs_dropped,
            summary_truncated=prompt.summary_truncated,
            user_truncated=prompt.user_truncated,
        )


class ModelStep:
    """Ask the reply model; a failure leaves no completion for the judge."""

    name = "model"
    records = False

    def __init__(self, settings: Settings, llm: LLMClient, system_prompt: Prompt) -> None:
        self.llm = llm
        self.vision_model = settings.vision_model
        self.max_tokens = settings.REPLY_MAX_TOKENS
        self.prompt_ref = system_prompt.ref
        # Left after the model for the commit and the hand-off, each one Redis command at worst.
        self.after_model_s = 2 * settings.redis_worst_s

    def __call__(self, turn: Turn) -> None:
        assert turn.prompt is not None
        budget = turn.remaining() - self.after_model_s
        try:
            turn.completion = self.llm.complete(
                turn.prompt.messages,
                purpose="reply",
                prompt_ref=self.prompt_ref,
                max_tokens=self.max_tokens,
                deadline_s=budget,
                model=self.vision_model if turn.image is not None else None,
            )
        except LLMUnavailable:
            turn.completion = None


class JudgeStep:
    """Settle the reply, and decide whether the exchange is valid context (design note 1)."""

    name = "judge"
    records = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def __call__(self, turn: Turn) -> None:
        completion = turn.completion
        if turn.claim is None:  # Redis down: answer, but nothing is judged or stored
            if completion is None:
                turn.settle(FALLBACK_REPLY, reason=filtering.REASON_MODEL_ERROR)
            else:
                turn.settle(completion.text or FALLBACK_REPLY)
            return
        if completion is None:
            log.info("pair.rejected", reason=filtering.REASON_MODEL_ERROR)
            MESSAGES.labels(outcome="rejected", reason=filtering.REASON_MODEL_ERROR).inc()
            turn.settle(FALLBACK_REPLY, reason=filtering.REASON_MODEL_ERROR, status="degraded")
            return
        assert turn.text is not None and turn.prompt is not None
        verdict = filtering.judge_pair(
            turn.text,
            completion.text,
            completion.finish_reason,
            min_chars=self.settings.MIN_PAIR_CHARS,
            rephrase_phrases=self.settings.rephrase_phrases,
        )
        if verdict.valid:
            turn.pair = Pair(
                user=clip(turn.stored_text or turn.text, STORED_TEXT_CHARS),
                assistant=clip(completion.text, STORED_TEXT_CHARS),
                ts=time.time(),
                sid=turn.msg.sid,
            )
            log.info("pair.accepted", prompt_tokens=turn.prompt.tokens)
            MESSAGES.labels(outcome="accepted", reason=verdict.reason).inc()
        else:
            log.info("pair.rejected", reason=verdict.reason)
            MESSAGES.labels(outcome="rejected", reason=verdict.reason).inc()
        turn.settle(completion.text or FALLBACK_REPLY, reason=verdict.reason)


class CommitStep:
    """Record the outcome atomically; a Redis failure degrades to answering without storing."""

    name = "commit"
    records = True

    def __init__(self, store: ContextStore) -> None:
        self.store = store

    def __call__(self, turn: Turn) -> None:
        if turn.claim is None:
            return
        msg = turn.msg
        try:
            result = self.store.commit(
                msg.user, turn.claim, msg.sid, turn.final_reply(), turn.pair, touch_context=turn.touch_context,
                usage=turn_usage(turn), last_task=clip(turn.task.task, STORED_TEXT_CHARS) if turn.task else None,
                to=msg.to, last_reference=turn.reference_trace,
            )
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="commit", error=str(err))
            if turn.status == "answered":
                turn.status = "degraded"
            return
        turn.commit = result
        if turn.pair is not None and not result.pair_stored:
            log.info("pair.discarded", reason="reset_or_takeover")
        if result.dropped:
            log.warning("summary.pending_dropped", dropped=result.dropped)


def system_with_knowledge(system_prompt: Prompt, rules: Prompt | None, unknown_reply: str) -> str:
    """Return the system prompt with the knowledge base's rules after it (as is without rules)."""
    if rules is None:
        return system_prompt.text
    return f"{system_prompt.text}\n\n{rules.text.replace('{unknown_reply}', unknown_reply)}"


def resolved(turn: Turn) -> str:
    """Return the resolved task for the reply prompt; "" when it only repeats the message
    (its line would cost tokens and say nothing)."""
    if turn.task is None or turn.text is None:
        return ""
    same = " ".join(turn.task.task.casefold().split()).strip(" .?!") == " ".join(turn.text.casefold().split()).strip(" .?!")
    return "" if same else turn.task.task


def turn_usage(turn: Turn) -> dict[str, int]:
    """Return the usage counts of this turn's model calls (the reply's, the task's, a voice
    note's transcription with its audio seconds)."""
    calls = [("reply", turn.completion, 0), ("task", turn.task_completion, 0)]
    if turn.transcript is not None:
        calls.append(("transcription", turn.transcript, turn.transcript.audio_seconds))
    counts: dict[str, int] = {}
    for purpose, call, seconds in calls:
        if call is not None:
            fields = usage_fields(purpose, call.model, call.prompt_tokens, call.completion_tokens, seconds)
            for field, n in fields.items():
                counts[field] = counts.get(field, 0) + n
    return counts


class HandOffStep:
    """Queue the background jobs the commit made due, and a topic shift's summary."""

    name = "hand-off"
    records = True

    def __init__(self, store: ContextStore, jobs: JobQueue | None, extraction_max_pairs: int = 0) -> None:
        self.store = store
        self.jobs = jobs
        self.extraction_max_pairs = extraction_max_pairs  # 0: never postpone

    def __call__(self, turn: Turn) -> None:
        if turn.claim is None:
            return
        user = turn.msg.user
        if turn.commit is not None:
            for kind, token in turn.commit.due.items():
                self._enqueue(kind, user, token)
            self._postpone_extraction(turn)
        if turn.topic_shift:
            self._summarize_now(user, turn.commit)

    def _postpone_extraction(self, turn: Turn) -> None:
        commit = turn.commit
        if self.jobs is not None and commit is not None and commit.pair_stored and EXTRACTION not in commit.due:
            postpone_extraction(self.jobs, turn.msg.user, turn.memory.meta, commit.seq, self.extraction_max_pairs)

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
