"""RQ jobs. Each takes primitive ids, builds its collaborators once per process, calls one
domain function and lets exceptions propagate so RQ records and retries them."""

from __future__ import annotations

import time
import uuid
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

import structlog
from rq import get_current_job

from bot.app import make_media_fetcher
from bot.channels.twilio.deferred import DeferredReplies
from bot.channels.twilio.sender import MessageSender, make_message_sender
from bot.channels.twilio.typing import TypingIndicator
from bot.config import load_settings
from bot.conversation.replies import BotWords
from bot.exceptions import LLMUnavailable
from bot.jobs.queue import DEFERRED_REPLY, REMINDER
from bot.jobs.reminders import ReminderJobs
from bot.reminders.delivery import deliver
from bot.jobs.handoff import follow_up, hand_off, hurry, start
from bot.conversation.summary import WAITING_FOR_EXTRACTION, Summarizer, summarize_conversation
from bot.conversation.summary import summarize_when_idle as fold_when_idle
from bot.memory.entity_extraction import EntityRules, read_entities, user_facts
from bot.memory.extraction import extract_facts, unread_pairs
from bot.memory.rules import FactRules
from bot.observability.logs import configure_logging, mask_phone
from bot.observability.metrics import BACKGROUND_LAG_SECONDS, ENTITY_RUNS, EXTRACTIONS, SUMMARIES
from bot.services import Services, build_services
from bot.storage.records import as_int
from bot.storage.triggers import ENTITIES, EXTRACTION, IDLE_SUMMARY, SUMMARY

log = structlog.get_logger(__name__)

#: A reminder this late with no job waiting is queued by the workers' sweep (RQ's scheduler
#: moves jobs every second; a late one means its job was lost).
SWEEP_LATE_S = 5


@lru_cache(maxsize=1)
def services() -> Services:
    """Build this worker process's collaborators from the environment, once; with deferred
    replies on, the workers fetch and transcribe media as the webhook would."""
    settings = load_settings()
    configure_logging(settings.LOG_LEVEL, settings.log_json)
    return build_services(settings, media_source=make_media_fetcher(settings) if settings.deferred_on else None,
                          role="worker")


@lru_cache(maxsize=1)
def deferred_replies() -> DeferredReplies:
    """Return what answers deferred messages in this process (built once)."""
    s = services()
    assert s.deferred is not None and s.deferred_pipeline is not None
    sender = message_sender()  # this process's one outbound path (deferred replies need the account)
    assert sender is not None
    return DeferredReplies(s.deferred_pipeline, s.deferred, sender, TypingIndicator(sender.client, s.settings.TYPING_MAX_S),
                           BotWords(s.prompts.replies, s.settings.BOT_LANGUAGE))


def answer_deferred(user: str, token: str) -> dict[str, Any]:
    """Answer the user's deferred messages, oldest first, through the Messages API
    (docs/deferred.md)."""
    _bind("deferred", user)
    sent = deferred_replies().answer(user, token)
    _observe_lag(DEFERRED_REPLY)
    return {"sent": sent}


def deferred_failed(job: Any, connection: Any, exc_type: Any, exc: Any, tb: Any) -> None:
    """Log a failed attempt; after the last retry, give up the user's hold: their queue stays,
    and their next deferred message starts a job."""
    user, token, final = _failed("deferred", job, exc_type, exc)
    deferred = services().deferred
    if final and user and deferred is not None:
        deferred.release(user, token)


def summarizer(s: Services) -> Summarizer:
    """Return what a summary run needs, from this process's collaborators."""
    return Summarizer(
        s.store, s.llm, s.counter, s.prompts.summary, s.settings.SUMMARY_MAX_TOKENS, s.settings.SUMMARY_INPUT_TOKENS
    )


def _observe_lag(kind: str) -> None:
    """Record how long this job took from entering its queue (when it was due) to now."""
    job = get_current_job()
    enqueued = getattr(job, "enqueued_at", None)
    if enqueued is None:
        return
    if enqueued.tzinfo is None:
        enqueued = enqueued.replace(tzinfo=timezone.utc)
    BACKGROUND_LAG_SECONDS.labels(job=kind).observe(max(0.0, (datetime.now(timezone.utc) - enqueued).total_seconds()))


def _bind(job_kind: str, user: str) -> None:
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(job=job_kind, job_run=uuid.uuid4().hex[:12], user=mask_phone(user))


def summarize_user(user: str, token: str, clear_recent: bool = False, upto: int | None = None) -> dict[str, Any]:
    """Fold the user's pending pairs into their summary."""
    _bind("summary", user)
    s = services()
    result = summarize_conversation(user, token, summarizer(s), clear_recent=clear_recent, upto=upto)
    s.usage.count_call(user, "summary", result.completion)
    _model_answered(s, result.completion)
    SUMMARIES.labels(result="stored" if result.applied else "skipped").inc()
    if result.held:  # the extraction that reads them comes first; it queues the summary again
        hurry(s.jobs, s.store, EXTRACTION, user)
    if result.reason != WAITING_FOR_EXTRACTION:
        follow_up(s.jobs, s.store, SUMMARY, user)
    _observe_lag(SUMMARY)
    return {"applied": result.applied, "consumed": result.consumed, "reason": result.reason}


def summarize_when_idle(user: str, token: str) -> dict[str, Any]:
    """Fold what left the recent window into the summary once the user is quiet; if they
    wrote meanwhile, look again when they will have been quiet long enough."""
    _bind("idle_summary", user)
    s = services()
    result = fold_when_idle(user, token, summarizer(s), idle_s=s.settings.SUMMARY_IDLE_S, now=time.time())
    if result.held:
        hurry(s.jobs, s.store, EXTRACTION, user)
    if result.wait_s > 0 and not _look_again(s, IDLE_SUMMARY, user, token, result.wait_s):
        return {"outcome": "superseded"}  # not quiet yet, or a summary running: unless erased meanwhile
    return {"outcome": result.outcome}


def extract_user_facts(user: str, token: str, urgent: bool = False) -> dict[str, Any]:
    """Extract durable facts from the user's oldest unread pairs into their memory; `urgent`
    (a summary waits for these pairs) reads them at once, without waiting for a pause."""
    _bind("extraction", user)
    s = services()
    meta = s.meta.meta(user)
    if not _holds(s, meta, EXTRACTION, token):
        log.info("extraction.superseded")  # erased, or handed to a hurried job: no model call
        return {"status": "superseded"}
    if meta.get("opted_out") == "1":
        s.store.release_trigger(user, EXTRACTION, token)
        EXTRACTIONS.labels(result="skipped").inc()
        log.info("extraction.skipped", reason="opted_out")
        return {"status": "skipped_opted_out"}
    settings = s.settings
    pairs = unread_pairs(s.store, user, as_int(meta.get("extracted_seq"), "extracted_seq"),
                         limit=settings.EXTRACTION_MAX_PAIRS)
    wait_s = 0.0
    if 0 < len(pairs) < settings.EXTRACTION_MAX_PAIRS and settings.EXTRACTION_IDLE_S > 0 and not urgent:
        wait_s = s.store.load(user).until_quiet(settings.EXTRACTION_IDLE_S, time.time())
    if wait_s > 0:  # the user is still writing: one call later reads the whole burst
        if not _look_again(s, EXTRACTION, user, token, wait_s):
            log.info("extraction.superseded")
            return {"status": "superseded"}
        EXTRACTIONS.labels(result="waiting").inc()
        return {"status": "waiting", "wait_s": round(wait_s, 1)}
    result = extract_facts(
        user,
        pairs,
        s.facts,
        s.llm,
        s.prompts.extraction,
        model=s.settings.extraction_model,
        rules=FactRules.from_settings(s.settings),
        now=time.time(),
        token=token,
    )
    s.usage.count_call(user, "facts", result.completion)
    _model_answered(s, result.completion)
    if result.status == "nothing_new":
        s.store.release_trigger(user, EXTRACTION, token)
    EXTRACTIONS.labels(result=result.status).inc()
    follow_up(s.jobs, s.store, EXTRACTION, user)
    if result.status == "stored":  # a summary may have been waiting for these pairs
        follow_up(s.jobs, s.store, SUMMARY, user)
    if result.status == "stored" and result.stats.changed and settings.ENTITIES_ENABLED:
        start(s.jobs, s.store, ENTITIES, user)  # pass 2: the entities in what changed
    _observe_lag(EXTRACTION)
    return {"status": result.status, "pairs": result.pairs, **result.stats.as_dict()}


def extract_user_entities(user: str, token: str) -> dict[str, Any]:
    """Pass 2: read the entities of the user's facts added or changed since last read."""
    _bind("entities", user)
    s = services()
    settings = s.settings
    meta = s.meta.meta(user)
    if not _holds(s, meta, ENTITIES, token):
        log.info("entities.superseded")  # erased, or taken over by a re-extraction: no model call
        return {"status": "superseded"}
    if meta.get("opted_out") == "1":
        s.store.release_trigger(user, ENTITIES, token)
        ENTITY_RUNS.labels(result="skipped").inc()
        return {"status": "skipped_opted_out"}
    result = read_entities(
        user, token, s.facts, s.entities, s.llm, s.prompts.entities,
        model=settings.entity_model, rules=EntityRules.from_settings(settings),
    )
    s.usage.count_call(user, "entities", result.completion)
    _model_answered(s, result.completion)
    if result.status in ("nothing_new", "discarded"):  # discarded: an opt-out meanwhile (if still ours)
        s.store.release_trigger(user, ENTITIES, token)
    ENTITY_RUNS.labels(result=result.status).inc()
    if result.status == "stored" and (result.left or _unread_facts(s, user)):
        start(s.jobs, s.store, ENTITIES, user)  # facts left, or changed while it ran
    _observe_lag(ENTITIES)
    return {"status": result.status, "read": result.read, **result.stats.as_dict()}


def _holds(s: Services, meta: dict[str, str], kind: str, token: str) -> bool:
    """Return whether the job with `token` still holds its trigger (kept in user_memory)."""
    return meta.get(f"{s.store.policy.rule(kind).job}_token") == token


def _unread_facts(s: Services, user: str) -> bool:
    """Return whether any fact changed since pass 2 last read it."""
    changed, gone = s.entities.load(user).unread(user_facts(s.facts, user), s.prompts.entities.version)
    return bool(changed or gone)


def _look_again(s: Services, kind: str, user: str, token: str, wait_s: float) -> bool:
    """Queue this waiting job's next look, wait_s from now, handing it the trigger; False when
    the job no longer holds it (the user was erased, or another job took over)."""
    again = s.store.renew_trigger(user, kind, token)
    if again is None:
        return False
    hand_off(s.jobs, s.store, kind, user, again, delay_s=wait_s)
    return True


def probe_model() -> bool:
    """While jobs wait out a retry after a model outage, ask the model one token (one worker
    at a time, every few seconds); when it answers, run those jobs now. Return whether it
    answered."""
    s = services()
    if not s.jobs.outage_noted():
        return False
    try:
        answer = s.llm.complete([{"role": "user", "content": "ping"}], purpose="probe", prompt_ref="probe",
                                max_tokens=1, deadline_s=5.0, max_retries=0)
    except LLMUnavailable as err:
        log.info("model.still_down", error=str(err)[:200])
        return False
    _model_answered(s, answer)
    return True


def _model_answered(s: Services, completion: Any) -> None:
    """After a model call that worked: if jobs wait for a retry after an outage, run them now."""
    if completion is None:
        return
    hurried = s.jobs.after_model_success()
    if hurried:
        log.info("jobs.retries_hurried", jobs=hurried, detail="the model answers again")


def _failed(kind: str, job: Any, exc_type: Any, exc: Any) -> tuple[str, str, bool]:
    user = job.args[0] if job.args else ""
    token = job.args[1] if len(job.args) > 1 else ""
    _bind(kind, user)
    final = not job.retries_left
    if isinstance(exc, LLMUnavailable) and not final:
        services().jobs.note_outage()  # the first model success after it runs the retries at once
    log.error(f"{kind}.failed", error=f"{exc_type.__name__}: {exc}", final=final, retries_left=job.retries_left)
    return user, token, final


def summary_failed(job: Any, connection: Any, exc_type: Any, exc: Any, tb: Any) -> None:
    """Log a failed attempt; after the last retry, free the trigger for the next pair."""
    SUMMARIES.labels(result="failed").inc()
    user, token, final = _failed("summary", job, exc_type, exc)
    if final and user:
        services().store.release_trigger(user, SUMMARY, token)


def extraction_failed(job: Any, connection: Any, exc_type: Any, exc: Any, tb: Any) -> None:
    """Log a failed attempt; after the last retry, free the trigger for the next pair."""
    EXTRACTIONS.labels(result="failed").inc()
    user, token, final = _failed("extraction", job, exc_type, exc)
    if final and user:
        services().store.release_trigger(user, EXTRACTION, token)


def idle_summary_failed(job: Any, connection: Any, exc_type: Any, exc: Any, tb: Any) -> None:
    """Log a failed attempt; after the last retry, free the trigger for the next pair."""
    user, token, final = _failed("idle_summary", job, exc_type, exc)
    if final and user:
        services().store.release_trigger(user, IDLE_SUMMARY, token)


def entities_failed(job: Any, connection: Any, exc_type: Any, exc: Any, tb: Any) -> None:
    """Log a failed attempt; after the last retry, free the trigger for the next extraction."""
    ENTITY_RUNS.labels(result="failed").inc()
    user, token, final = _failed("entities", job, exc_type, exc)
    if final and user:
        services().store.release_trigger(user, ENTITIES, token)


def sync_sites(periodic: bool = False) -> dict[str, Any]:
    """Sync every website of the knowledge base (bot/jobs/sites.py); a periodic run schedules
    the next one at its end, whatever happened."""
    from bot.jobs.sites import schedule_sync

    s = services()
    assert s.sites is not None
    if periodic:
        s.sites.store.release_next()
    try:
        reports = s.sites.sync_all(actor="scheduler" if periodic else "sync_now")
    finally:  # a no-op while one is scheduled, or with KB_SYNC_INTERVAL=0
        schedule_sync(s.jobs.connection, s.sites.store, s.settings.KB_SYNC_INTERVAL)
    return {"sites": len(reports), "failed": sum(r.failed for r in reports)}


@lru_cache(maxsize=1)
def message_sender() -> MessageSender | None:
    """Return this process's one outbound path for messages the business starts (reminders),
    or None without TWILIO_ACCOUNT_SID."""
    s = services()
    return make_message_sender(s.settings, s.users.window, s.users.outbox, s.activity)


def send_reminder(user: str, rid: str) -> dict[str, Any]:
    """Send one reminder at its time (docs/reminders.md)."""
    _bind("reminder", user)
    s = services()
    store = s.users.reminders
    assert store is not None
    sender = message_sender()
    if sender is None:  # nothing can be sent by API; said once, kept as why
        taken = store.take(user, rid)
        if taken is not None:
            store.settle(user, rid, "undeliverable", why="no_twilio_account")
        log.warning("reminder.not_sent", reminder=rid, reason="no TWILIO_ACCOUNT_SID")
        return {"outcome": "undeliverable"}
    outcome = deliver(user, rid, store, sender, s.users.outbox, template_sid=s.settings.TEMPLATE_REMINDER_SID,
                      default_from=s.store.load(user).reply_from)
    if outcome == "early":  # moved later meanwhile (or the sweep was ahead of it): wait again
        reminder = store.get(user, rid)
        if reminder is not None:
            ReminderJobs(s.jobs).schedule(user, rid, reminder.due)
    _observe_lag(REMINDER)
    return {"outcome": outcome}


def reminder_failed(job: Any, connection: Any, exc_type: Any, exc: Any, tb: Any) -> None:
    """Log a failed attempt (the network, Redis); after the last retry the reminder is marked
    failed, so the user's list and the console say so."""
    user, rid, final = _failed("reminder", job, exc_type, exc)
    store = services().users.reminders
    if final and user and store is not None:
        if store.take(user, rid) is not None:
            store.settle(user, rid, "failed", why=exc_type.__name__)


def sweep_reminders(now: float | None = None) -> int:
    """Queue every reminder overdue by SWEEP_LATE_S whose job is gone (a queue's Redis that
    restarted empty, a scheduler that died holding its lock); return how many. The reminder's
    own take keeps a second job from sending it twice."""
    s = services()
    store = s.users.reminders
    if store is None or not s.settings.REMINDERS:
        return 0
    now = time.time() if now is None else now
    jobs = ReminderJobs(s.jobs)
    queued = 0
    for user, rid, _due in store.due(now - SWEEP_LATE_S):
        reminder = store.get(user, rid)
        if reminder is None or not reminder.waiting:
            store.forget(user, [rid])  # erased or done: the index keeps nothing stale
            continue
        if reminder.status != "pending" and reminder.lease >= now:
            continue  # a job has it; if that job died, its lease runs out and the next sweep looks again
        status = jobs.status(user, rid)
        if status is None:
            jobs.schedule(user, rid, 0)  # now
        elif status != "scheduled" or not jobs.hurry(user, rid):
            continue  # queued or running: the workers have it
        queued += 1
        log.warning("reminder.requeued", reminder=rid, late_s=round(now - reminder.due, 1), job=status or "lost")
    return queued
