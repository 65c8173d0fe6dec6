"""Enqueue background jobs on RQ; the job functions themselves live in workers/.

Each job kind (the names of bot/storage/triggers.py) is one entry in JOB_KINDS: its queue,
its function, its failure callback and its id prefix. Job ids are `<prefix>-<tag>-<token>`:
the token of the trigger the job holds, and a pseudonym of the user, so RQ's own logs carry
no phone numbers and erasing a user can find their jobs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import redis
from rq import Callback, Queue, Retry
from rq.job import Job, NoSuchJobError

from bot.storage.triggers import EXTRACTION, SUMMARY

SUMMARY_QUEUE = "summaries"
FACTS_QUEUE = "facts"

#: One model request per job; a minute covers the slowest with its own timeout inside.
JOB_TIMEOUT_S = 60
#: Failed jobs stay inspectable in RQ's failed registry for a week.
FAILED_TTL_S = 7 * 86400


@dataclass(frozen=True)
class JobKind:
    """How one kind of background job is queued."""

    queue: str
    func: str
    on_failure: str
    id_prefix: str
    result_ttl: int  # seconds RQ keeps a finished job's result


JOB_KINDS = {
    SUMMARY: JobKind(SUMMARY_QUEUE, "workers.jobs.summarize_user", "workers.jobs.summary_failed", "summary", 3600),
    EXTRACTION: JobKind(
        FACTS_QUEUE, "workers.jobs.extract_user_facts", "workers.jobs.extraction_failed", "facts", 600
    ),
}


def user_tag(user: str) -> str:
    """Return a stable pseudonym for a user, for job ids and RQ's own logs (no numbers)."""
    return hashlib.sha256(user.encode()).hexdigest()[:12]


def job_id(kind: str, user: str, token: str) -> str:
    """Return the id of the job of this kind that holds trigger `token`."""
    return f"{JOB_KINDS[kind].id_prefix}-{user_tag(user)}-{token}"


def summary_job_id(user: str, token: str) -> str:
    """Return the id of the summary job that holds trigger `token`."""
    return job_id(SUMMARY, user, token)


def extraction_job_id(user: str, token: str) -> str:
    """Return the id of the extraction job that holds trigger `token`."""
    return job_id(EXTRACTION, user, token)


class JobQueue:
    """Hand slow work to the RQ workers."""

    def __init__(self, connection: redis.Redis, retry_intervals: list[int]) -> None:
        self.connection = connection
        self.queues = {name: Queue(name, connection=connection) for name in {k.queue for k in JOB_KINDS.values()}}
        self.retry_intervals = retry_intervals

    @property
    def summaries(self) -> Queue:
        """The queue summary jobs wait in."""
        return self.queues[SUMMARY_QUEUE]

    def enqueue(self, kind: str, user: str, token: str, **kwargs: Any) -> str:
        """Queue the user's job of this kind for trigger `token`, with our retry, timeout and
        failure-callback policy; return its id."""
        spec = JOB_KINDS[kind]
        ident = job_id(kind, user, token)
        job = self.queues[spec.queue].enqueue_call(
            spec.func,
            args=(user, token),
            kwargs=kwargs,
            job_id=ident,
            retry=Retry(max=len(self.retry_intervals), interval=self.retry_intervals),
            on_failure=Callback(spec.on_failure),
            timeout=JOB_TIMEOUT_S,
            result_ttl=spec.result_ttl,
            failure_ttl=FAILED_TTL_S,
            description=ident.rsplit("-", 1)[0],
        )
        return job.id

    def job_status(self, ident: str) -> str | None:
        """Return a job's status (queued, started, scheduled, failed, finished), if it exists."""
        try:
            job = Job.fetch(ident, connection=self.connection)
        except NoSuchJobError:
            return None
        status = job.get_status(refresh=False)
        return status.value if status is not None else None

    def failed_summaries(self, user: str) -> list[str]:
        """Return the ids of this user's summary jobs in RQ's failed registry."""
        prefix = f"{JOB_KINDS[SUMMARY].id_prefix}-{user_tag(user)}-"
        return [j for j in self.summaries.failed_job_registry.get_job_ids() if j.startswith(prefix)]

    def purge_user(self, user: str) -> int:
        """Delete every job of this user (their arguments hold the number); return how many."""
        tag = user_tag(user)
        deleted = 0
        for kind in JOB_KINDS.values():
            for key in self.connection.scan_iter(match=f"rq:job:{kind.id_prefix}-{tag}-*", count=1000):
                ident = key.decode().removeprefix("rq:job:") if isinstance(key, bytes) else key[7:]
                if ":" in ident:  # rq:job:<id>:results and similar belong to the job
                    continue
                try:
                    Job.fetch(ident, connection=self.connection).delete(remove_from_queue=True)
                    deleted += 1
                except NoSuchJobError:
                    continue
        return deleted

    def depth(self) -> dict[str, int]:
        """Return jobs waiting and failed per queue."""
        out = {}
        for name in (SUMMARY_QUEUE, FACTS_QUEUE):
            out[name] = self.queues[name].count
            out[f"{name}_failed"] = self.queues[name].failed_job_registry.count
        return out
