"""What operators see of the queues: each queue's depth, the workers and their state, the
failed jobs with kind, age and last error line (never a job's arguments: they hold the user's
number), and putting a failed job back. The console and the CLI read RQ only through here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

import redis
from rq import Worker
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job

from bot.exceptions import StoreUnavailable
from bot.jobs.queue import JOB_KINDS, JobQueue
from bot.observability.logs import mask_phone

#: Failed jobs shown per queue, newest first.
FAILED_SHOWN = 100
#: An error line is cut here (a traceback's last line can be long).
ERROR_CHARS = 240
_PHONE = re.compile(r"\+?\d{7,15}")
_KINDS = {kind.id_prefix: name for name, kind in JOB_KINDS.items()}


@dataclass(frozen=True)
class QueueRow:
    """One queue and how many of its jobs are in each state."""

    name: str
    waiting: int
    scheduled: int
    running: int
    failed: int


@dataclass(frozen=True)
class WorkerRow:
    """One RQ worker as the page shows it."""

    name: str
    state: str
    queues: str
    job: str
    heartbeat: float | None
    done: int
    failed: int


@dataclass(frozen=True)
class FailedJob:
    """One failed job as the page shows it."""

    id: str
    queue: str
    kind: str
    ended_at: float | None
    error: str


@dataclass(frozen=True)
class Board:
    """The queues, the workers and the failed jobs (newest first)."""

    queues: list[QueueRow]
    workers: list[WorkerRow]
    failed: list[FailedJob]


def last_line(exc_string: str | None) -> str:
    """Return the last line of a traceback (the exception and its message), numbers masked."""
    lines = [line.strip() for line in (exc_string or "").strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "(no error recorded)"
    line = _PHONE.sub(lambda m: mask_phone(m.group(0) if m.group(0).startswith("+") else "+" + m.group(0)), line)
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 1] + "…"


def stamp(moment: datetime | None) -> float | None:
    """Return RQ's datetime (naive ones are UTC) as Unix seconds."""
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def failed_jobs(jobs: JobQueue, queue_name: str) -> list[FailedJob]:
    """Return the queue's newest failed jobs."""
    queue = jobs.queues[queue_name]
    ids = queue.failed_job_registry.get_job_ids(0, FAILED_SHOWN - 1, desc=True)
    out = []
    for ident, job in zip(ids, Job.fetch_many(ids, connection=queue.connection)):
        if job is None:
            continue
        result = job.latest_result()
        out.append(FailedJob(
            id=ident,
            queue=queue_name,
            kind=_KINDS.get(ident.split("-", 1)[0], "other"),
            ended_at=stamp(job.ended_at),
            error=last_line(result.exc_string if result is not None else None),
        ))
    return out


def board(jobs: JobQueue) -> Board:
    """Return the queues, the workers and the failed jobs; raise StoreUnavailable."""
    try:
        queues = [QueueRow(name, queue.count, queue.scheduled_job_registry.count, queue.started_job_registry.count,
                           queue.failed_job_registry.count) for name, queue in sorted(jobs.queues.items())]
        workers = [WorkerRow(w.name, w.get_state(), ", ".join(w.queue_names()), w.get_current_job_id() or "",
                             stamp(w.last_heartbeat), w.successful_job_count, w.failed_job_count)
                   for w in Worker.all(connection=jobs.connection)]
        failed = [job for name in sorted(jobs.queues) for job in failed_jobs(jobs, name)]
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    failed.sort(key=lambda j: j.ended_at or 0, reverse=True)
    return Board(queues, workers, failed)


def is_failed(jobs: JobQueue, queue_name: str, ident: str) -> bool:
    """True when the queue exists and this job is in its failed registry."""
    queue = jobs.queues.get(queue_name)
    return queue is not None and ident in queue.failed_job_registry


def requeue_failed(jobs: JobQueue, queue_name: str, ident: str) -> bool:
    """Put a failed job back on its queue; False when it is gone or no longer failed."""
    if not is_failed(jobs, queue_name, ident):
        return False
    try:
        jobs.queues[queue_name].failed_job_registry.requeue(ident)
    except (NoSuchJobError, InvalidJobOperation):
        return False
    return True
