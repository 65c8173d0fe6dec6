"""RQ jobs. Each takes primitive ids, builds its collaborators once per process, calls one
domain function and lets exceptions propagate so RQ records and retries them."""

from __future__ import annotations

import uuid
from functools import lru_cache
from typing import Any

import structlog

from bot.config import load_settings
from bot.logs import configure_logging, mask_phone
from bot.metrics import SUMMARIES
from bot.services import Services, build_services
from bot.summary import summarize_conversation

log = structlog.get_logger(__name__)


@lru_cache(maxsize=1)
def services() -> Services:
    """Build this worker process's collaborators from the environment, once."""
    settings = load_settings()
    configure_logging(settings.LOG_LEVEL, settings.log_json)
    return build_services(settings)


def _bind(job_kind: str, user: str) -> None:
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(job=job_kind, job_run=uuid.uuid4().hex[:12], user=mask_phone(user))


def summarize_user(user: str, clear_recent: bool = False, upto: int | None = None) -> dict[str, Any]:
    """Fold the user's pending pairs into their summary."""
    _bind("summary", user)
    s = services()
    result = summarize_conversation(
        user,
        s.store,
        s.llm,
        s.counter,
        s.prompts.summary,
        max_tokens=s.settings.SUMMARY_MAX_TOKENS,
        input_tokens=s.settings.SUMMARY_INPUT_TOKENS,
        clear_recent=clear_recent,
        upto=upto,
    )
    SUMMARIES.labels(result="stored" if result.applied else "skipped").inc()
    return {"applied": result.applied, "consumed": result.consumed, "reason": result.reason}


def summary_failed(job: Any, connection: Any, exc_type: Any, exc: Any, tb: Any) -> None:
    """Log a failed attempt; after the last retry, free the trigger for the next pair."""
    user = job.args[0] if job.args else ""
    _bind("summary", user)
    SUMMARIES.labels(result="failed").inc()
    final = not job.retries_left
    log.error("summary.failed", error=f"{exc_type.__name__}: {exc}", final=final, retries_left=job.retries_left)
    if final and user:
        services().store.release_summary(user)
