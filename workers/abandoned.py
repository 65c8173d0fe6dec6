"""Redo at once the jobs of a worker that died mid-job (docs/conversation.md, "Killed workers").

A job counts as abandoned when its execution's heartbeat has run out in its queue's started
registry: three `--job-monitoring-interval`s after the last beat, or at once when a
supervisor saw its worker die (workers/supervise.py zeroes the score). RQ's own cleanup then
runs the failure callback and retries the job only after the retry interval meant for model
failures, and the dead execution, still listed in the job's execution registry for a minute
after its record expired, made that retry fail with `Execution … not found in Redis`.

A dead worker is not the job's fault: `redo_abandoned` removes the dead execution and puts
the job back at the front of its queue now, without spending a retry. Each entry is claimed
by removing it from the started registry (one ZREM), so two workers never redo one job
twice; the job still holds its trigger token, so its work is done once. A job abandoned
MAX_REDOS times (one that kills its worker, say by running out of memory) is left to RQ's
own handling: retries with backoff, then the failed registry.

A work horse that dies under a living worker (the kernel's OOM killer picks the horse) is the
same case, met by that worker itself: workers/worker.py redoes its job through `redo_now`.
"""

from __future__ import annotations

import structlog
from rq import Queue
from rq.executions import Execution, ExecutionRegistry
from rq.job import Job, JobStatus
from rq.utils import current_timestamp, parse_composite_key

from bot.observability.metrics import JOBS_REDONE

log = structlog.get_logger(__name__)

#: How many times in a row one job is redone at once after its worker died; past that, RQ's
#: retries with their backoff take over (a job that kills every worker must end somewhere).
MAX_REDOS = 3
#: The job's meta field that counts its redos.
REDOS_FIELD = "abandoned_redos"


def redo_abandoned(queue: Queue, now: float | None = None) -> list[str]:
    """Put every job of this queue whose worker died back at the front of the queue, now;
    return their ids."""
    connection = queue.connection
    registry = queue.started_job_registry
    cutoff = current_timestamp() if now is None else now
    redone = []
    for entry in connection.zrangebyscore(registry.key, 0, cutoff):
        composite = entry.decode() if isinstance(entry, bytes) else str(entry)
        job_id, execution_id = parse_composite_key(composite)
        job = queue.fetch_job(job_id)
        if job is None or job.get_status(refresh=False) != JobStatus.STARTED:
            continue  # a leftover of a job that ended: RQ's cleanup removes it
        if not may_redo(job):
            continue  # RQ's cleanup runs its failure callback and its retry policy
        if not connection.zrem(registry.key, composite):
            continue  # another worker's maintenance took it
        with connection.pipeline() as pipe:
            pipe.delete(Execution(execution_id, job_id, connection).key)
            pipe.zrem(ExecutionRegistry(job_id, connection).key, execution_id)
            pipe.execute()
        redo_now(queue, job, why="its worker died mid-job")
        redone.append(job_id)
    return redone


def may_redo(job: Job) -> bool:
    """Return whether a job whose worker died may be redone at once once more."""
    return _redos(job) < MAX_REDOS


def redo_now(queue: Queue, job: Job, why: str) -> None:
    """Queue the job again at the front of its queue, counting the redo; its retries are left
    as they were."""
    redos = _redos(job) + 1
    job.meta[REDOS_FIELD] = redos
    queue.enqueue_job(job, at_front=True)
    JOBS_REDONE.labels(queue=queue.name).inc()
    log.warning("job.redone", job_id=job.id, queue=queue.name, redo=redos, detail=why)


def _redos(job: Job) -> int:
    try:
        return int(job.meta.get(REDOS_FIELD, 0))
    except (TypeError, ValueError):
        return 0
