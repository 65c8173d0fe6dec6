"""The conversation domain: one inbound message in, one reply out, context kept compact."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol

import structlog

from bot import commands, filtering
from bot.config import Settings
from bot.context import BuiltPrompt, build_prompt
from bot.exceptions import LLMUnavailable, StoreUnavailable
from bot.llm import Completion, LLMClient
from bot.logs import mask_phone
from bot.memory import select_memory
from bot.metrics import MESSAGES, RESETS
from bot.prompts import Prompt
from bot.store import Claim, Context, ContextStore, FactStore, Memory, Pair
from bot.tokens import TokenCounter

log = structlog.get_logger(__name__)

FALLBACK_REPLY = "Sorry, I can't answer right now. Please try again in a minute."
NON_TEXT_REPLY = "Thanks! I can only read text messages for now. Could you type your question?"
EMPTY_MESSAGE_REPLY = "I received an empty message. What would you like to ask?"
RESET_REPLY = (
    "Done: I've cleared our conversation and we're starting fresh. "
    "Facts you asked me to remember are kept; say \"delete my data\" to erase everything."
)
OPERATOR_RESET_REPLY = "Reset done for {target}."
OPT_OUT_REPLY = (
    "Okay: from now on I won't learn new facts about you. What I already know stays until you "
    "say \"delete my data\"; say \"remember me again\" to turn memory back on."
)
OPT_IN_REPLY = "Okay: I'll remember useful facts about you again. Say \"stop remembering me\" to turn it off."
ERASE_CONFIRM_REPLY = (
    "This will permanently erase everything I have stored about you: our conversation and "
    "every fact I remember. Reply YES within {minutes} minutes to confirm; anything else cancels."
)
ERASED_REPLY = "Done: everything I had stored about you has been erased."

#: Each side of a stored pair is cut to this many characters: the prompt budget could never
#: use more, and it keeps a user's Redis footprint bounded (a 5000-character message is 5 KB).
STORED_TEXT_CHARS = 1000

#: How often a redelivery polls for the first attempt's answer while it is in flight.
INFLIGHT_POLL_S = 0.2

#: Placeholder stored for media when MEDIA_PLACEHOLDERS is on, by MIME type family.
MEDIA_PLACEHOLDERS = {
    "image": "[Image received]",
    "audio": "[Voice message received]",
    "video": "[Video received]",
    "application": "[Document received]",
}


class SummaryJobs(Protocol):
    """Where summary and extraction work is handed off (RQ in production)."""

    def enqueue_summary(self, user: str, token: str, clear_recent: bool = False, upto: int | None = None) -> str:
        """Queue the user's summary job."""

    def enqueue_extraction(self, user: str, token: str) -> str:
        """Queue the user's fact extraction job."""

    def purge_user(self, user: str) -> int:
        """Delete every queued, finished or failed job of the user."""


@dataclass(frozen=True)
class InboundMessage:
    """A WhatsApp message as the domain sees it, whatever transport carried it."""

    user: str  # E.164, e.g. +14155550100
    sid: str
    body: str
    media_types: tuple[str, ...] = ()
    has_location: bool = False
    profile_name: str = ""


@dataclass
class Outcome:
    """What to answer and what happened, for the transport and the logs."""

    reply: str
    status: str  # answered, duplicate, inflight, degraded, command
    reason: str = filtering.REASON_OK
    stored: bool = False
    count_since_summary: int | None = None
    model_s: float = 0.0
    prompt_tokens: int = 0
    seq: int | None = None  # the user's latest stored pair number after this message


def clip(text: str, limit: int) -> str:
    """Cut text to at most limit characters, marking the cut."""
    return text if len(text) <= limit else text[: limit - 4].rstrip() + " […]"


def media_placeholder(media_types: tuple[str, ...], has_location: bool) -> str:
    """Return the placeholder text that stands for attachments."""
    parts = [MEDIA_PLACEHOLDERS.get(t.split("/", 1)[0], "[Attachment received]") for t in media_types]
    if has_location:
        parts.append("[Location received]")
    return " ".join(parts)


def _actor(actor: str) -> str:
    return mask_phone(actor) if actor.startswith("+") else actor


def reset_conversation(store: ContextStore, target: str, actor: str, via: str) -> bool:
    """Clear one user's conversation (not their facts) and write the audit event."""
    existed = store.reset(target)
    RESETS.labels(via=via).inc()
    log.info("audit.reset", actor=_actor(actor), target=mask_phone(target), via=via, existed=existed)
    return existed


def erase_user(facts: FactStore, target: str, actor: str, via: str, jobs: SummaryJobs | None = None) -> int:
    """Delete every key of one user, facts and queued jobs included, and write the audit event."""
    deleted = facts.erase(target)
    purged = 0
    if jobs is not None:
        try:
            purged = jobs.purge_user(target)
        except Exception as err:  # the keys are gone; stale jobs will find nothing and write nothing
            log.error("erase.jobs_not_purged", error=f"{type(err).__name__}: {err}")
    log.info("audit.erase", actor=_actor(actor), target=mask_phone(target), via=via,
             keys_deleted=deleted, jobs_deleted=purged)
    return deleted


class Conversation:
    """Answer messages from compact context and keep that context valid."""

    def __init__(
        self,
        settings: Settings,
        store: ContextStore,
        llm: LLMClient,
        counter: TokenCounter,
        system_prompt: Prompt,
        jobs: SummaryJobs | None = None,
        sleep: Callable[[float], None] = time.sleep,
        facts: FactStore | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.facts = facts
        self.llm = llm
        self.counter = counter
        self.system_prompt = system_prompt
        self.jobs = jobs
        self.sleep = sleep
        self.full_history = settings.CONTEXT_STRATEGY == "full_history"
        self.reset_phrases = commands.parse_phrases(settings.RESET_PHRASES)
        self.topic_phrases = commands.parse_phrases(settings.TOPIC_SHIFT_PHRASES)

    # -- entry point -------------------------------------------------------------------
    def handle(self, msg: InboundMessage) -> Outcome:
        """Answer one inbound message exactly once and record it."""
        try:
            claim = self._claim(msg)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="claim", error=str(err))
            return self._answer_without_store(msg)
        if claim.status == "duplicate":
            log.info("message.duplicate", replayed=claim.reply is not None)
            return Outcome(reply=claim.reply or "", status="duplicate")
        if claim.status == "inflight":
            log.warning("message.inflight_timeout")
            return Outcome(reply="", status="inflight")
        try:
            return self._process(msg, claim)
        except BaseException:
            # Unexpected failure: forget the claim so a redelivery can try again.
            try:
                self.store.release(msg.user, claim, msg.sid)
            except StoreUnavailable:
                pass
            raise

    def _claim(self, msg: InboundMessage) -> Claim:
        """Claim the MessageSid, waiting a bounded time if a first attempt is in flight."""
        deadline = time.monotonic() + self.settings.DEDUP_WAIT_S
        claim = self.store.claim(msg.user, msg.sid)
        while claim.status == "inflight" and time.monotonic() < deadline:
            self.sleep(INFLIGHT_POLL_S)
            claim = self.store.claim(msg.user, msg.sid)
        return claim

    # -- processing --------------------------------------------------------------------
    def _user_text(self, msg: InboundMessage) -> tuple[str | None, str]:
        """Return the text that enters the prompt, or None and the reason it can't."""
        body = msg.body.strip()
        has_media = bool(msg.media_types) or msg.has_location
        if has_media and self.settings.MEDIA_PLACEHOLDERS:
            placeholder = media_placeholder(msg.media_types, msg.has_location)
            return (f"{placeholder} {body}".strip(), filtering.REASON_OK)
        if body:
            return body, filtering.REASON_OK
        if has_media:
            return None, filtering.REASON_NON_TEXT
        return None, filtering.REASON_EMPTY_MESSAGE

    def _process(self, msg: InboundMessage, claim: Claim) -> Outcome:
        context, memory = claim.context, claim.memory
        text, reason = self._user_text(msg)
        if text is None:
            reply = NON_TEXT_REPLY if reason == filtering.REASON_NON_TEXT else EMPTY_MESSAGE_REPLY
            log.info("pair.rejected", reason=reason, media=list(msg.media_types))
            MESSAGES.labels(outcome="rejected", reason=reason).inc()
            return self._finish(msg, claim, reply, None, reason)

        requested = memory.erase_requested_at
        erase_pending = requested is not None and time.time() - requested < self.settings.ERASE_CONFIRM_S
        command = commands.recognise(
            text,
            msg.user,
            reset_phrases=self.reset_phrases,
            topic_phrases=self.topic_phrases,
            operators=self.settings.operators,
            erase_pending=erase_pending,
        )
        if requested is not None and (command is None or command.kind != "erase_confirm") and self.facts:
            self.facts.set_meta(msg.user, erase_requested_at=None)  # anything but YES cancels
            log.info("erase.cancelled")
        memory_command = self._memory_command(msg, claim, command)
        if memory_command is not None:
            return memory_command
        if command is not None and command.kind == "reset":
            reset_conversation(self.store, msg.user, msg.user, via="user")
            return self._command_done(msg, claim, RESET_REPLY, "reset")
        if command is not None and command.kind == "operator_reset" and command.target:
            reset_conversation(self.store, command.target, msg.user, via="operator")
            reply = OPERATOR_RESET_REPLY.format(target=command.target)
            return self._command_done(msg, claim, reply, "operator_reset")

        topic_shift = command is not None and command.kind == "topic_shift"
        if topic_shift:
            # The old topic is not carried verbatim: answer from the summary alone, and
            # have the worker fold the old pairs into the summary now.
            context = Context(summary=context.summary, epoch=context.epoch)
        outcome = self._answer(msg, claim, text, context, self._memory_block(memory, text))
        if topic_shift:
            self._summarize_now(msg.user, outcome.seq, outcome.stored)
        return outcome

    def _memory_command(self, msg: InboundMessage, claim: Claim, command: commands.Command | None) -> Outcome | None:
        """Carry out opt-out, opt-in and erase commands; None if the message is none of them."""
        if command is None or self.facts is None:
            return None
        if command.kind == "opt_out":
            self.facts.set_meta(msg.user, opted_out="1", extract_job_at=None, extract_job_token=None)
            log.info("audit.memory_opt_out", via="user")
            return self._command_done(msg, claim, OPT_OUT_REPLY, "opt_out")
        if command.kind == "opt_in":
            self.facts.set_meta(msg.user, opted_out=None)
            log.info("audit.memory_opt_in", via="user")
            return self._command_done(msg, claim, OPT_IN_REPLY, "opt_in")
        if command.kind == "erase":
            self.facts.set_meta(msg.user, erase_requested_at=str(time.time()))
            minutes = max(1, self.settings.ERASE_CONFIRM_S // 60)
            reply = ERASE_CONFIRM_REPLY.format(minutes=minutes)
            return self._command_done(msg, claim, reply, "erase_requested")
        if command.kind == "erase_confirm":
            erase_user(self.facts, msg.user, msg.user, via="user", jobs=self.jobs)
            MESSAGES.labels(outcome="rejected", reason="command").inc()
            outcome = self._finish(msg, claim, ERASED_REPLY, None, "erased", touch_context=False)
            outcome.status = "command"
            return outcome
        return None

    def _memory_block(self, memory: Memory, text: str) -> str:
        """Select the facts for this message and render the read-only block."""
        if self.facts is None:
            return ""
        scoped = {
            "session": FactStore.decode(memory.session_facts),
            "user": FactStore.decode(memory.facts),
        }
        try:
            scoped["org"] = self.facts.org_facts()
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="org_facts", error=str(err))
        if not any(scoped.values()):
            return ""
        selection = select_memory(
            scoped,
            text,
            self.counter,
            threshold=self.settings.EXTRACTION_CONFIDENCE,
            conflict_margin=self.settings.CONFLICT_MARGIN,
            max_tokens=self.settings.MEMORY_MAX_TOKENS,
        )
        log.debug("memory.selected", facts=len(selection.selected), dropped=len(selection.dropped), tokens=selection.tokens)
        return selection.block

    def _ask(
        self, text: str, context: Context, memory_block: str, max_tokens: int | None
    ) -> tuple[BuiltPrompt, Completion | None]:
        """Build the reply prompt and ask the model; the completion is None if it failed."""
        prompt = build_prompt(
            self.system_prompt.text,
            context,
            text,
            self.counter,
            max_tokens=max_tokens,
            max_user_tokens=self.settings.MAX_USER_MESSAGE_TOKENS,
            memory_block=memory_block,
        )
        log.debug(
            "prompt.built",
            tokens=prompt.tokens,
            pairs_used=prompt.pairs_used,
            pairs_dropped=prompt.pairs_dropped,
            summary_truncated=prompt.summary_truncated,
            user_truncated=prompt.user_truncated,
        )
        try:
            completion = self.llm.complete(
                prompt.messages,
                purpose="reply",
                prompt_ref=self.system_prompt.ref,
                max_tokens=self.settings.REPLY_MAX_TOKENS,
            )
        except LLMUnavailable:
            return prompt, None
        return prompt, completion

    def _answer(
        self, msg: InboundMessage, claim: Claim, text: str, context: Context, memory_block: str = ""
    ) -> Outcome:
        """Ask the model, judge the pair, and commit."""
        max_tokens = None if self.full_history else self.settings.MAX_PROMPT_TOKENS
        prompt, completion = self._ask(text, context, memory_block, max_tokens)
        if completion is None:
            log.info("pair.rejected", reason=filtering.REASON_MODEL_ERROR)
            MESSAGES.labels(outcome="rejected", reason=filtering.REASON_MODEL_ERROR).inc()
            outcome = self._finish(msg, claim, FALLBACK_REPLY, None, filtering.REASON_MODEL_ERROR)
            outcome.status = "degraded"
            outcome.prompt_tokens = prompt.tokens
            return outcome

        verdict = filtering.judge_pair(
            text,
            completion.text,
            completion.finish_reason,
            min_chars=self.settings.MIN_PAIR_CHARS,
            rephrase_phrases=self.settings.rephrase_phrases,
        )
        reply = completion.text or FALLBACK_REPLY
        pair = None
        if verdict.valid:
            pair = Pair(
                user=clip(text, STORED_TEXT_CHARS),
                assistant=clip(completion.text, STORED_TEXT_CHARS),
                ts=time.time(),
                sid=msg.sid,
            )
            log.info("pair.accepted", prompt_tokens=prompt.tokens)
            MESSAGES.labels(outcome="accepted", reason=verdict.reason).inc()
        else:
            log.info("pair.rejected", reason=verdict.reason)
            MESSAGES.labels(outcome="rejected", reason=verdict.reason).inc()
        outcome = self._finish(msg, claim, reply, pair, verdict.reason)
        outcome.model_s = completion.duration_s
        outcome.prompt_tokens = prompt.tokens
        return outcome

    def _command_done(self, msg: InboundMessage, claim: Claim, reply: str, reason: str) -> Outcome:
        MESSAGES.labels(outcome="rejected", reason="command").inc()
        outcome = self._finish(msg, claim, reply, None, reason)
        outcome.status = "command"
        return outcome

    def _finish(
        self,
        msg: InboundMessage,
        claim: Claim,
        reply: str,
        pair: Pair | None,
        reason: str,
        touch_context: bool = True,
    ) -> Outcome:
        """Commit the outcome; a Redis failure here degrades to answering without storing."""
        outcome = Outcome(reply=reply, status="answered", reason=reason)
        try:
            result = self.store.commit(msg.user, claim, msg.sid, reply, pair, touch_context=touch_context)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="commit", error=str(err))
            outcome.status = "degraded"
            return outcome
        outcome.seq = result.seq
        outcome.stored = result.pair_stored
        outcome.count_since_summary = result.count_since_summary
        if pair is not None and not result.pair_stored:
            log.info("pair.discarded", reason="reset_or_takeover")
        if result.dropped:
            log.warning("summary.pending_dropped", dropped=result.dropped)
        if result.summary_due:
            self._enqueue_summary(msg.user, result.summary_token)
        if result.extraction_due:
            self._enqueue_extraction(msg.user, result.extraction_token)
        return outcome

    # -- summaries -----------------------------------------------------------------------
    def _hand_off(self, kind: str, enqueue: Callable[[], str], release: Callable[[], object]) -> None:
        """Queue a job; if the queue is unreachable, free its trigger so the next pair retries."""
        try:
            job_id = enqueue()
        except Exception as err:  # Redis trouble: log it, never fail the reply
            log.error(f"{kind}.enqueue_failed", error=f"{type(err).__name__}: {err}")
            try:
                release()
            except StoreUnavailable:
                pass
            return
        log.info(f"{kind}.enqueued", job_id=job_id)

    def _enqueue_summary(self, user: str, token: str, clear_recent: bool = False, upto: int | None = None) -> None:
        """Hand the summary to a worker."""
        if self.jobs is not None:
            jobs = self.jobs
            self._hand_off(
                "summary",
                lambda: jobs.enqueue_summary(user, token, clear_recent=clear_recent, upto=upto),
                lambda: self.store.release_summary(user, token),
            )

    def _enqueue_extraction(self, user: str, token: str) -> None:
        """Hand fact extraction to a worker."""
        if self.jobs is not None and self.facts is not None:
            jobs, facts = self.jobs, self.facts
            self._hand_off(
                "extraction",
                lambda: jobs.enqueue_extraction(user, token),
                lambda: facts.release_extraction(user, token),
            )

    def _summarize_now(self, user: str, seq: int | None, new_pair_stored: bool) -> None:
        """Compress everything before a topic shift into the summary, now.

        The topic job takes the trigger even from a queued job (whose result is then
        discarded), so the old topic never stays verbatim in the recent window.
        """
        upto = (seq - 1 if new_pair_stored else seq) if seq is not None else 0
        if upto <= 0:
            log.info("topic.shift", summary_queued=False)
            return
        try:
            token = self.store.take_summary(user)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="topic_shift", error=str(err))
            return
        log.info("topic.shift", summary_queued=True)
        self._enqueue_summary(user, token, clear_recent=True, upto=upto)

    def _answer_without_store(self, msg: InboundMessage) -> Outcome:
        """Answer from the message alone when Redis is down; nothing is remembered."""
        text, reason = self._user_text(msg)
        if text is None:
            return Outcome(reply=NON_TEXT_REPLY, status="degraded", reason=reason)
        prompt, completion = self._ask(text, Context(), "", self.settings.MAX_PROMPT_TOKENS)
        if completion is None:
            return Outcome(reply=FALLBACK_REPLY, status="degraded", reason=filtering.REASON_MODEL_ERROR)
        return Outcome(
            reply=completion.text or FALLBACK_REPLY,
            status="degraded",
            model_s=completion.duration_s,
            prompt_tokens=prompt.tokens,
        )
