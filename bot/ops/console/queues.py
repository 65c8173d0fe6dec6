"""RQ's queues with their depth, the workers with their state, the failed jobs with kind, age
and error (never a job's arguments: they hold the user's number), requeue or delete by POST."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone

import redis
import structlog
from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from rq import Worker
from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job

from bot.exceptions import StoreUnavailable
from bot.jobs.queue import JOB_KINDS
from bot.observability.logs import mask_phone
from bot.ops.console.auth import login_required
from bot.ops.console.helpers import actor, services

log = structlog.get_logger(__name__)

bp = Blueprint("queues", __name__, url_prefix="/queues")

#: Failed jobs shown per queue, newest first.
FAILED_SHOWN = 100
#: An error line is cut here (a traceback's last line can be long).
ERROR_CHARS = 240
_PHONE = re.compile(r"\+?\d{7,15}")
_KINDS = {kind.id_prefix: name for name, kind in JOB_KINDS.items()}


@dataclass(frozen=True)
class FailedJob:
    """One failed job as the page shows it."""

    id: str
    queue: str
    kind: str
    ended_at: float | None
    error: str


def last_line(exc_string: str | None) -> str:
    """Return the last line of a traceback (the exception and its message), numbers masked."""
    lines = [line.strip() for line in (exc_string or "").strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "(no error recorded)"
    line = _PHONE.sub(lambda m: mask_phone(m.group(0) if m.group(0).startswith("+") else "+" + m.group(0)), line)
    return line if len(line) <= ERROR_CHARS else line[: ERROR_CHARS - 1] + "…"


def _stamp(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()


def failed_jobs(queue_name: str) -> list[FailedJob]:
    """Return the queue's newest failed jobs."""
    queue = services().jobs.queues[queue_name]
    registry = queue.failed_job_registry
    ids = registry.get_job_ids(0, FAILED_SHOWN - 1, desc=True)
    out = []
    for ident, job in zip(ids, Job.fetch_many(ids, connection=queue.connection)):
        if job is None:
            continue
        result = job.latest_result()
        out.append(FailedJob(
            id=ident,
            queue=queue_name,
            kind=_KINDS.get(ident.split("-", 1)[0], "other"),
            ended_at=_stamp(job.ended_at),
            error=last_line(result.exc_string if result is not None else None),
        ))
    return out


@bp.get("")
@login_required
def index() -> ResponseReturnValue:
    """Show the queues, the workers and the failed jobs."""
    jobs = services().jobs
    try:
        queues = [{
            "name": name,
            "waiting": queue.count,
            "scheduled": queue.scheduled_job_registry.count,
            "running": queue.started_job_registry.count,
            "failed": queue.failed_job_registry.count,
        } for name, queue in sorted(jobs.queues.items())]
        workers = [{
            "name": w.name,
            "state": w.get_state(),
            "queues": ", ".join(w.queue_names()),
            "job": w.get_current_job_id() or "",
            "heartbeat": _stamp(w.last_heartbeat),
            "done": w.successful_job_count,
            "failed": w.failed_job_count,
        } for w in Worker.all(connection=jobs.connection)]
        failed = [job for name in sorted(jobs.queues) for job in failed_jobs(name)]
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    failed.sort(key=lambda j: j.ended_at or 0, reverse=True)
    return render_template("console/queues.html", queues=queues, workers=workers, failed=failed, now=time.time())


def _failed(queue_name: str, ident: str) -> tuple[object, str]:
    """Return the queue's failed registry holding this job, or 404."""
    queue = services().jobs.queues.get(queue_name)
    if queue is None or ident not in queue.failed_job_registry:
        abort(404)
    return queue.failed_job_registry, ident


@bp.post("/<queue_name>/failed/<ident>/requeue")
@login_required
def requeue(queue_name: str, ident: str) -> ResponseReturnValue:
    """Put a failed job back on its queue."""
    registry, ident = _failed(queue_name, ident)
    try:
        registry.requeue(ident)  # type: ignore[attr-defined]
    except (NoSuchJobError, InvalidJobOperation):
        flash("That job is gone or no longer failed.", "error")
        return redirect(url_for("console.queues.index"))
    log.info("audit.job_requeued", actor=actor(), queue=queue_name, job=ident)
    flash(f"Requeued {ident}.", "ok")
    return redirect(url_for("console.queues.index"))


@bp.post("/<queue_name>/failed/<ident>/delete")
@login_required
def delete(queue_name: str, ident: str) -> ResponseReturnValue:
    """Delete a failed job (its record and its arguments)."""
    _failed(queue_name, ident)
    existed = services().jobs.delete(ident)
    log.info("audit.job_deleted", actor=actor(), queue=queue_name, job=ident, existed=existed)
    flash(f"Deleted {ident}." if existed else "That job was already gone.", "ok")
    return redirect(url_for("console.queues.index"))
