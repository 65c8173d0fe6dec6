"""Enqueue background jobs on RQ; the job functions themselves live in workers/."""

from __future__ import annotations

import hashlib

import redis
from rq import Callback, Queue, Retry
from rq.job import Job, NoSuchJobError

SUMMARY_QUEUE = "summaries"
FACTS_QUEUE = "facts"

#: One model request per job; a minute covers the slowest with its own timeout inside.
JOB_TIMEOUT_S = 60
#: Failed jobs stay inspectable in RQ's failed registry for a week.
FAILED_TTL_S = 7 * 86400


def user_tag(user: str) -> str:
    """Return a stable pseudonym for a user, for job ids and RQ's own logs (no numbers)."""
    return hashlib.sha256(user.encode()).hexdigest()[:12]


def summary_job_id(user: str, token: str) -> str:
    """Return the id of the summary job that holds trigger `token`."""
    return f"summary-{user_tag(user)}-{token}"


def extraction_job_id(user: str, token: str) -> str:
    """Return the id of the extraction job that holds trigger `token`."""
    return f"facts-{user_tag(user)}-{token}"


class JobQueue:
    """Hand slow work to the RQ workers."""

    def __init__(self, connection: redis.Redis, retry_intervals: list[int]) -> None:
        self.connection = connection
        self.summaries = Queue(SUMMARY_QUEUE, connection=connection)
        self.facts = Queue(FACTS_QUEUE, connection=connection)
        self.retry_intervals = retry_intervals

    def _enqueue(self, queue: Queue, func: str, on_failure: str, job_id: str, result_ttl: int, *args: object) -> str:
        """Queue one job with our retry, timeout and failure-callback policy; return its id."""
        job = queue.enqueue(
            func,
            *args,
            job_id=job_id,
            retry=Retry(max=len(self.retry_intervals), interval=self.retry_intervals),
            on_failure=Callback(on_failure),
            job_timeout=JOB_TIMEOUT_S,
            result_ttl=result_ttl,
            failure_ttl=FAILED_TTL_S,
            description=job_id.rsplit("-", 1)[0],
        )
        return job.id

    def enqueue_summary(self, user: str, token: str, clear_recent: bool = False, upto: int | None = None) -> str:
        """Queue the user's summary job for trigger `token` and return its id."""
        return self._enqueue(
            self.summaries, "workers.jobs.summarize_user", "workers.jobs.summary_failed",
            summary_job_id(user, token), 3600, user, token, clear_recent, upto,
        )

    def enqueue_extraction(self, user: str, token: str) -> str:
        """Queue the user's fact extraction job for trigger `token` and return its id."""
        return self._enqueue(
            self.facts, "workers.jobs.extract_user_facts", "workers.jobs.extraction_failed",
            extraction_job_id(user, token), 600, user, token,
        )

    def job_status(self, job_id: str) -> str | None:
        """Return a job's status (queued, started, scheduled, failed, finished), if it exists."""
        try:
            job = Job.fetch(job_id, connection=self.connection)
        except NoSuchJobError:
            return None
        status = job.get_status(refresh=False)
        return status.value if status is not None else None

    def failed_summaries(self, user: str) -> list[str]:
        """Return the ids of this user's summary jobs in RQ's failed registry."""
        prefix = f"summary-{user_tag(user)}-"
        return [j for j in self.summaries.failed_job_registry.get_job_ids() if j.startswith(prefix)]

    def purge_user(self, user: str) -> int:
        """Delete every job of this user (their arguments hold the number); return how many."""
        tag = user_tag(user)
        deleted = 0
        for pattern in (f"rq:job:summary-{tag}-*", f"rq:job:facts-{tag}-*"):
            for key in self.connection.scan_iter(match=pattern, count=1000):
                job_id = key.decode().removeprefix("rq:job:") if isinstance(key, bytes) else key[7:]
                if ":" in job_id:  # rq:job:<id>:results and similar belong to the job
                    continue
                try:
                    Job.fetch(job_id, connection=self.connection).delete(remove_from_queue=True)
                    deleted += 1
                except NoSuchJobError:
                    continue
        return deleted

    def depth(self) -> dict[str, int]:
        """Return jobs waiting and failed per queue."""
        return {
            SUMMARY_QUEUE: self.summaries.count,
            f"{SUMMARY_QUEUE}_failed": self.summaries.failed_job_registry.count,
            FACTS_QUEUE: self.facts.count,
            f"{FACTS_QUEUE}_failed": self.facts.failed_job_registry.count,
        }
