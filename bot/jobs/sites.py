"""The websites' sync on RQ (docs/knowledge.md): now (`kb sync`, the console's "sync now"),
and every KB_SYNC_INTERVAL on RQ's scheduler, one scheduled at a time.

The periodic sync is one scheduled job at a time: whoever schedules it first notes it in
Redis (bot/storage/sites.py claim_next, with a TTL a little past its due time), so adding a
second site or running `kb sync` never schedules a second one. The job frees the note when
it starts and schedules the next at its end; if it is lost (Redis restored from an old
snapshot), the next `kb add https://…` or "sync now" schedules it again. A sync itself runs
one at a time on the whole deployment (the sync lock).
"""

from __future__ import annotations

import time
from datetime import timedelta

import redis
from rq import Queue

from bot.jobs.queue import FACTS_QUEUE, FAILED_TTL_S
from bot.storage.sites import SiteStore

SYNC_FUNC = "workers.jobs.sync_sites"
#: A site of 200 pages, each fetched and perhaps embedded: far longer than a model call.
SYNC_TIMEOUT_S = 3600


def schedule_sync(connection: redis.Redis, sites: SiteStore, interval_s: int) -> bool:
    """Schedule the next periodic sync unless one is (interval 0: never); True when this call
    scheduled it."""
    if interval_s <= 0 or not sites.all():
        return False
    due = time.time() + interval_s
    if not sites.claim_next(due, ttl_s=interval_s + 600):
        return False
    Queue(FACTS_QUEUE, connection=connection).enqueue_in(
        timedelta(seconds=interval_s), SYNC_FUNC, kwargs={"periodic": True}, job_id=f"kb-sync-{int(due)}",
        job_timeout=SYNC_TIMEOUT_S, result_ttl=0, failure_ttl=FAILED_TTL_S)
    return True


def sync_now(connection: redis.Redis) -> str:
    """Queue a sync of every site now; return its job id."""
    job = Queue(FACTS_QUEUE, connection=connection).enqueue(
        SYNC_FUNC, kwargs={"periodic": False}, job_id=f"kb-sync-now-{int(time.time() * 1000)}",
        job_timeout=SYNC_TIMEOUT_S, result_ttl=0, failure_ttl=FAILED_TTL_S)
    return str(job.id)
