"""Enqueue background jobs on RQ; the job functions themselves live in workers/."""

from __future__ import annotations

import redis
from rq import Callback, Queue, Retry
from rq.job import Job, NoSuchJobError

SUMMARY_QUEUE = "summaries"

#: A summary call is one model request; a minute covers the slowest with retries inside.
SUMMARY_JOB_TIMEOUT_S = 60
#: Failed jobs stay inspectable in RQ's failed registry for a week.
FAILED_TTL_S = 7 * 86400


def summary_job_id(user: str) -> str:
    """Return the one job id a user's summary runs under (there is never more than one)."""
    return f"summary-{user.lstrip('+')}"


class JobQueue:
    """Hand slow work to the RQ workers."""

    def __init__(self, connection: redis.Redis, retry_intervals: list[int]) -> None:
        self.connection = connection
        self.summaries = Queue(SUMMARY_QUEUE, connection=connection)
        self.retry_intervals = retry_intervals

    def enqueue_summary(self, user: str, clear_recent: bool = False, upto: int | None = None) -> str:
        """Queue the user's summary job and return its id."""
        job = self.summaries.enqueue(
            "workers.jobs.summarize_user",
            user,
            clear_recent,
            upto,
            job_id=summary_job_id(user),
            retry=Retry(max=len(self.retry_intervals), interval=self.retry_intervals),
            on_failure=Callback("workers.jobs.summary_failed"),
            job_timeout=SUMMARY_JOB_TIMEOUT_S,
            result_ttl=3600,
            failure_ttl=FAILED_TTL_S,
            description=f"summary for user ***{user[-2:]}",
        )
        return job.id

    def summary_status(self, user: str) -> str | None:
        """Return the status of the user's summary job (queued, started, failed…), if any."""
        try:
            job = Job.fetch(summary_job_id(user), connection=self.connection)
        except NoSuchJobError:
            return None
        status = job.get_status(refresh=False)
        return status.value if status is not None else None

    def depth(self) -> dict[str, int]:
        """Return jobs waiting and failed per queue."""
        return {
            SUMMARY_QUEUE: self.summaries.count,
            f"{SUMMARY_QUEUE}_failed": self.summaries.failed_job_registry.count,
        }
