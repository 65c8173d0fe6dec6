"""Hand a due job to the queue; the message path and finished jobs both do this."""

from __future__ import annotations

from typing import Any

import structlog

from bot.exceptions import StoreUnavailable
from bot.jobs.queue import JobQueue
from bot.storage.context import ContextStore
from bot.storage.records import as_int
from bot.storage.triggers import EXTRACTION, EXTRACTION_JOB

log = structlog.get_logger(__name__)


def hand_off(jobs: JobQueue, store: ContextStore, kind: str, user: str, token: str, **kwargs: Any) -> str | None:
    """Queue the job holding trigger `token`; if the queue is unreachable, free the trigger so
    the next pair retries, and return None. Never raises: a reply must not fail for this."""
    try:
        job_id = jobs.enqueue(kind, user, token, **kwargs)
    except Exception as err:  # Redis trouble: log it, never fail the caller
        log.error(f"{kind}.enqueue_failed", error=f"{type(err).__name__}: {err}")
        try:
            store.release_trigger(user, kind, token)
        except StoreUnavailable:
            pass
        return None
    log.info(f"{kind}.enqueued", job_id=job_id)
    return job_id


def follow_up(jobs: JobQueue, store: ContextStore, kind: str, user: str) -> str | None:
    """After a job of this kind ended, queue the next one if pairs that came while it ran
    make it due (they found the trigger held); return its id, or None."""
    token = store.retrigger(user, kind)
    if token is None:
        return None
    log.info(f"{kind}.follow_up")
    return hand_off(jobs, store, kind, user, token)


def start(jobs: JobQueue, store: ContextStore, kind: str, user: str) -> str | None:
    """Queue the user's job of this kind unless one is already on the way (it, or its
    follow-up, will see the new work); return its id, or None."""
    token = store.take_free_trigger(user, kind)
    if token is None:
        return None
    return hand_off(jobs, store, kind, user, token)


def hurry(jobs: JobQueue, store: ContextStore, kind: str, user: str) -> str | None:
    """Run the user's job of this kind now if it is waiting for its delay (a summary waits
    for the pairs it is to read): its trigger goes to a job queued at once, marked urgent so
    it does not wait again, and the delayed one is deleted. Return the new job's id, or None
    when no job of this kind is waiting for its delay (none queued, one running, or one
    waiting between the retries of a failure: those run their course, so a job that keeps
    failing reaches its last retry and frees the trigger)."""
    token = store.trigger_tokens(user).get(kind)
    if not token or not jobs.waiting_for_delay(jobs.job_id(kind, user, token)):
        return None
    fresh = store.renew_trigger(user, kind, token)
    if fresh is None:  # it started, or an erase came, meanwhile
        return None
    jobs.delete(jobs.job_id(kind, user, token))
    log.info(f"{kind}.hurried")
    return hand_off(jobs, store, kind, user, fresh, delay_s=0, urgent=True)


def postpone_extraction(jobs: JobQueue, user: str, meta: dict[str, str], seq: int, max_pairs: int,
                        hurry: bool = False) -> bool:
    """The user wrote again while their extraction waits for their pause: move it to a full
    pause from now (one command, instead of a job that wakes only to look again); once
    `max_pairs` pairs wait unread, or with `hurry` (the pending pairs near their cap: a
    burst), to now (0 max_pairs: never move it). `meta` is the user's memory hash as the
    claim read it. Never raises."""
    token = meta.get(f"{EXTRACTION_JOB}_token")
    if not token or not max_pairs:
        return False
    full = hurry or seq - as_int(meta.get("extracted_seq"), "extracted_seq") >= max_pairs
    try:
        moved = jobs.reschedule(EXTRACTION, user, token, now=full)
    except Exception as err:  # the queue's Redis: the job looks again, as before
        log.warning("extraction.postpone_failed", error=f"{type(err).__name__}: {str(err)[:200]}")
        return False
    if moved:
        log.debug("extraction.rescheduled", now=full)
    return moved
