"""Reminders on RQ's scheduler (docs/reminders.md): one job per reminder, in the replies
queue (a user waits on it), scheduled for the whole second at or just after its time, with
the id `remind-<tag>-<reminder id>` (the user's pseudonym: bot/jobs/queue.py), so that
cancelling it, erasing the user, or the sweep finds it without a scan."""

from __future__ import annotations

import math
from datetime import datetime, timezone

from rq import Callback, Retry
from rq.job import Job, NoSuchJobError

from bot.jobs.queue import FAILED_TTL_S, JOB_KINDS, REMINDER, JobQueue

#: A send that failed on the network is tried again after these seconds (Twilio's refusals
#: are answers, not retried).
RETRY_INTERVALS = [10, 30, 120]
#: A send is one Messages API call (with its one retry), far under a minute.
JOB_TIMEOUT_S = 60


class ReminderJobs:
    """Schedule, move and drop reminder jobs."""

    def __init__(self, jobs: JobQueue) -> None:
        self.jobs = jobs

    def schedule(self, user: str, rid: str, due: float) -> None:
        """Schedule the reminder's job for its time (never a second early: RQ counts whole
        seconds); a reminder already due is queued now."""
        spec = JOB_KINDS[REMINDER]
        queue = self.jobs.queues[spec.queue]
        options = {"job_id": self.jobs.job_id(REMINDER, user, rid), "result_ttl": 0, "failure_ttl": FAILED_TTL_S,
                   "retry": Retry(max=len(RETRY_INTERVALS), interval=RETRY_INTERVALS),
                   "on_failure": Callback(spec.on_failure), "job_timeout": JOB_TIMEOUT_S,
                   "description": f"{spec.id_prefix}-{self.jobs.tag(user)}"}
        at = datetime.fromtimestamp(math.ceil(due), timezone.utc)
        if at <= datetime.now(timezone.utc):
            queue.enqueue(spec.func, user, rid, **options)
        else:
            queue.enqueue_at(at, spec.func, user, rid, **options)

    def unschedule(self, user: str, rid: str) -> None:
        """Drop the reminder's job, wherever it waits."""
        self.jobs.delete(self.jobs.job_id(REMINDER, user, rid))

    def status(self, user: str, rid: str) -> str | None:
        """Return the reminder's job's status (scheduled, queued, started…), None: no job."""
        return self.jobs.job_status(self.jobs.job_id(REMINDER, user, rid))

    def hurry(self, user: str, rid: str) -> bool:
        """Queue now a reminder's job still waiting in the scheduled registry past its time
        (the worker that held RQ's scheduler died: its lock outlives it by a minute)."""
        ident = self.jobs.job_id(REMINDER, user, rid)
        queue = self.jobs.queues[JOB_KINDS[REMINDER].queue]
        try:
            job = Job.fetch(ident, connection=self.jobs.connection)
        except NoSuchJobError:
            return False
        if not queue.scheduled_job_registry.remove(job):
            return False  # the scheduler moved it meanwhile
        queue.enqueue_job(job)
        return True
