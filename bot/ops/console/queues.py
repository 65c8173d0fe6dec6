"""RQ's queues with their depth, the workers with their state, the failed jobs with kind, age
and error (never a job's arguments: they hold the user's number), requeue or delete by POST."""

from __future__ import annotations

import time

import structlog
from flask import Blueprint, abort, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue

from bot.jobs.status import board, is_failed, requeue_failed
from bot.ops.console.auth import login_required
from bot.ops.console.helpers import actor, services

log = structlog.get_logger(__name__)

bp = Blueprint("queues", __name__, url_prefix="/queues")


@bp.get("")
@login_required
def index() -> ResponseReturnValue:
    """Show the queues, the workers and the failed jobs."""
    shown = board(services().jobs)
    return render_template("console/queues.html", queues=shown.queues, workers=shown.workers, failed=shown.failed,
                           now=time.time())


def _failed_or_404(queue_name: str, ident: str) -> None:
    if not is_failed(services().jobs, queue_name, ident):
        abort(404)


@bp.post("/<queue_name>/failed/<ident>/requeue")
@login_required
def requeue(queue_name: str, ident: str) -> ResponseReturnValue:
    """Put a failed job back on its queue."""
    _failed_or_404(queue_name, ident)
    if not requeue_failed(services().jobs, queue_name, ident):
        flash("That job is gone or no longer failed.", "error")
        return redirect(url_for("console.queues.index"))
    log.info("audit.job_requeued", actor=actor(), queue=queue_name, job=ident)
    flash(f"Requeued {ident}.", "ok")
    return redirect(url_for("console.queues.index"))


@bp.post("/<queue_name>/failed/<ident>/delete")
@login_required
def delete(queue_name: str, ident: str) -> ResponseReturnValue:
    """Delete a failed job (its record and its arguments)."""
    _failed_or_404(queue_name, ident)
    existed = services().jobs.delete(ident)
    log.info("audit.job_deleted", actor=actor(), queue=queue_name, job=ident, existed=existed)
    flash(f"Deleted {ident}." if existed else "That job was already gone.", "ok")
    return redirect(url_for("console.queues.index"))
