"""Rolling summaries: fold the pending pairs into the summary (docs/conversation.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import structlog

from bot.llm.client import Completion, LLMClient
from bot.llm.prompts import Prompt
from bot.llm.tokens import TokenCounter
from bot.observability.metrics import SUMMARY_LAG_SECONDS
from bot.storage.context import Context, ContextStore
from bot.storage.records import Pair
from bot.storage.triggers import IDLE_SUMMARY, SUMMARY

log = structlog.get_logger(__name__)

#: Why a summary folded nothing: every pending pair waits for fact extraction to read it.
WAITING_FOR_EXTRACTION = "waiting_for_extraction"
#: Words asked of the model; the token cap below is what is enforced.
WORDS_PER_TOKEN = 0.75


@dataclass(frozen=True)
class SummaryResult:
    """What one summary run did."""

    applied: bool
    consumed: int
    summary_tokens: int = 0
    reason: str = ""
    held: int = 0  # pairs left out because fact extraction has yet to read them
    completion: Completion | None = None  # the model call, for usage accounting


def render_transcript(summary: str, pairs: list[Pair]) -> str:
    """Return the summary prompt's user message: old summary, then the new exchanges."""
    lines = [f"Current summary: {summary or '(none yet)'}", "", "New exchanges:"]
    for pair in pairs:
        lines.append(f"User: {pair.user}")
        lines.append(f"Assistant: {pair.assistant}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Summarizer:
    """What a summary run needs: the store, the model and its prompt, and their limits."""

    store: ContextStore
    llm: LLMClient
    counter: TokenCounter
    prompt: Prompt
    max_tokens: int  # the summary's own cap (SUMMARY_MAX_TOKENS)
    input_tokens: int  # the most conversation one run reads (SUMMARY_INPUT_TOKENS)


def summarize_conversation(
    user: str, token: str, tools: Summarizer, *, clear_recent: bool = False, upto: int | None = None
) -> SummaryResult:
    """Replace the user's summary with one that also covers every pending pair.

    With `upto`, only pairs numbered up to it are folded in (a topic shift keeps the
    message that started the new topic out). Raises LLMUnavailable on model failure,
    leaving the state untouched for a retry.
    """
    store, llm, counter, prompt = tools.store, tools.llm, tools.counter, tools.prompt
    max_tokens, input_tokens = tools.max_tokens, tools.input_tokens
    snapshot = store.snapshot(user)
    if snapshot.token != token:
        log.info("summary.skipped", reason="superseded")
        return SummaryResult(applied=False, consumed=0, reason="superseded")
    wanted = [p for p in snapshot.pending if upto is None or p.n <= upto]
    # A pair fact extraction has yet to read stays out of the summary until it is read:
    # folding it in would drop it from chat_pending, and its facts with it.
    # The oldest first, stopping at the first unread one: apply_summary drops a prefix.
    hold = snapshot.extraction_hold
    pending = []
    for pair in wanted:
        if hold is not None and pair.n > hold:
            break
        pending.append(pair)
    held = len(wanted) - len(pending)
    if held:
        log.info("summary.held_for_extraction", held=held)
    clear_upto = upto if clear_recent else None
    if not pending:
        if clear_upto:
            # Nothing to summarize now, but the old topic must still leave the window.
            applied, reason = store.apply_summary(
                user, token, snapshot.epoch, snapshot.summarized_seq, snapshot.summary, clear_upto
            )
            log.info("summary.skipped", reason="nothing_pending", cleared_recent=applied)
            return SummaryResult(applied=applied, consumed=0, reason=reason, held=held)
        store.release_trigger(user, SUMMARY, token)
        reason = WAITING_FOR_EXTRACTION if held else "nothing_pending"
        log.info("summary.skipped", reason=reason)
        return SummaryResult(applied=False, consumed=0, reason=reason, held=held)

    # Keep the model's input bounded even when a long backlog built up.
    pairs = pending
    transcript = render_transcript(snapshot.summary, pairs)
    while counter.count(transcript) > input_tokens and len(pairs) > 1:
        pairs.pop()  # the newest wait for the next run
        transcript = render_transcript(snapshot.summary, pairs)
    transcript = counter.truncate(transcript, input_tokens)

    system = prompt.text.replace("{max_words}", str(int(max_tokens * WORDS_PER_TOKEN)))
    completion = llm.complete(
        [{"role": "system", "content": system}, {"role": "user", "content": transcript}],
        purpose="summary",
        prompt_ref=prompt.ref,
        max_tokens=max_tokens,
    )
    text = counter.truncate(completion.text.strip(), max_tokens)
    if not text:
        store.release_trigger(user, SUMMARY, token)
        log.warning("summary.empty")
        return SummaryResult(applied=False, consumed=0, reason="empty_summary", completion=completion)

    # The highest number, so the head of chat_pending always goes even if numbering restarted
    # inside it (a corrupt counter): every applied summary shrinks it, and follow-ups end.
    consumed_upto = max(p.n for p in pairs)
    applied, reason = store.apply_summary(user, token, snapshot.epoch, consumed_upto, text, clear_upto)
    tokens = counter.count(text)
    if applied:
        lag = time.time() - snapshot.triggered_at if snapshot.triggered_at else None
        if lag is not None:
            SUMMARY_LAG_SECONDS.observe(lag)
        log.info(
            "summary.stored",
            consumed=len(pairs),
            summary_tokens=tokens,
            clear_recent=clear_recent,
            lag_ms=round(lag * 1000, 1) if lag is not None else None,
        )
    else:
        log.warning("summary.discarded", reason=reason, consumed=len(pairs))
    return SummaryResult(
        applied=applied, consumed=len(pairs) if applied else 0, summary_tokens=tokens, reason=reason, held=held,
        completion=completion,
    )


#: When a summary job is running at the idle look, look again this much later.
BUSY_RETRY_S = 5.0
#: When every pair to fold waits for fact extraction, look again this much later (the
#: extraction job is hurried meanwhile; a lost one frees its trigger after the job lease).
HOLD_RETRY_S = 30.0


@dataclass(frozen=True)
class IdleResult:
    """What one idle check did; `wait_s` says when to look again if the user was not idle."""

    outcome: str  # summarized, partial, nothing_pending, busy, superseded, not_idle, waiting_for_extraction
    wait_s: float = 0.0  # look again this much later (not_idle, busy, partial, waiting); 0: done
    held: int = 0  # pairs fact extraction has yet to read, kept out of the summary


def _outside_window(store: ContextStore, user: str, context: Context) -> list[Pair]:
    """Return the unsummarized pairs that have left the recent window of `context`."""
    recent = {p.n for p in context.recent}
    return [p for p in store.pending_pairs(user) if p.n not in recent]


def summarize_when_idle(user: str, token: str, tools: Summarizer, *, idle_s: float, now: float) -> IdleResult:
    """Once the user has been quiet idle_s, fold every unsummarized pair into the summary, so
    a user at rest keeps only the summary and the recent window (chat_pending empties).

    A user who wrote since is not idle: the caller looks again later. A summary job already
    holding its trigger will do the work itself.
    """
    store = tools.store
    if store.trigger_tokens(user).get(IDLE_SUMMARY) != token:
        return IdleResult("superseded")
    context = store.load(user)
    wait_s = context.until_quiet(idle_s, now)
    if wait_s > 0:
        return IdleResult("not_idle", wait_s=wait_s)
    if not _outside_window(store, user, context):
        store.release_trigger(user, IDLE_SUMMARY, token)
        return IdleResult("nothing_pending")
    held_since = context.summary_job_at or 0.0
    if context.summary_job_token and now - held_since <= store.policy.job_lease_s:
        # A summary job is running; pairs that came after its snapshot may stay: look again.
        return IdleResult("busy", wait_s=BUSY_RETRY_S)
    summary_token = store.take_trigger(user, SUMMARY)
    try:
        result = summarize_conversation(user, summary_token, tools)
    except BaseException:
        # Free the summary trigger; the idle trigger stays ours, so RQ's retry can fold later.
        store.release_trigger(user, SUMMARY, summary_token)
        raise
    log.info("summary.idle", applied=result.applied, consumed=result.consumed, held=result.held)
    if result.reason == WAITING_FOR_EXTRACTION:
        return IdleResult(WAITING_FOR_EXTRACTION, wait_s=HOLD_RETRY_S, held=result.held)
    if result.applied and _outside_window(store, user, store.load(user)):
        # the input cap, or extraction, left some: fold the rest next
        return IdleResult("partial", wait_s=HOLD_RETRY_S if result.held else BUSY_RETRY_S, held=result.held)
    store.release_trigger(user, IDLE_SUMMARY, token)
    return IdleResult("summarized" if result.applied else result.reason)
