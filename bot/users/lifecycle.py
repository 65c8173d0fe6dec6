"""Reset, opt-out and erase: the operations a user's own commands and operators both run.

Each writes an audit event with masked numbers. They sit below the conversation so that
the message path and the operator surfaces (bot/ops/) call the same code.
"""

from __future__ import annotations

import time

import structlog

from bot.observability.logs import mask_phone
from bot.observability.metrics import RESETS
from bot.storage.memory_meta import TASK_OFF_FIELD
from bot.storage.triggers import EXTRACTION_JOB
from bot.storage.users import erase_keys
from bot.users.data import UserData

log = structlog.get_logger(__name__)


def _actor(actor: str) -> str:
    return mask_phone(actor) if actor.startswith("+") else actor


def reset_conversation(data: UserData, target: str, actor: str, via: str) -> bool:
    """Clear one user's conversation (not their facts), and any change waiting for their yes
    (docs/tools.md), and write the audit event."""
    existed = data.store.reset(target)
    if data.actions is not None:
        data.actions.forget(target)
    RESETS.labels(via=via).inc()
    log.info("audit.reset", actor=_actor(actor), target=mask_phone(target), via=via, existed=existed)
    return existed


def set_opt_out(
    data: UserData, target: str, opted_out: bool, actor: str, via: str, free_trigger: bool = False
) -> None:
    """Turn fact extraction off or back on for one user; free_trigger also drops the
    extraction trigger, so a job already queued is superseded (the user's own command)."""
    fields: dict[str, str | None] = {"opted_out": "1" if opted_out else None}
    if opted_out and free_trigger:
        fields.update({f"{EXTRACTION_JOB}_at": None, f"{EXTRACTION_JOB}_token": None})
    data.meta.set_meta(target, **fields)
    event = "audit.memory_opt_out" if opted_out else "audit.memory_opt_in"
    log.info(event, actor=_actor(actor), target=mask_phone(target), via=via)


def set_messages_off(data: UserData, target: str, off: bool, actor: str, via: str) -> None:
    """Stop (or allow again) every message the business starts for this user: the reopen
    template, held messages, reminders (docs/window.md); their own messages are still
    answered. Recorded with its time and source; held messages are dropped."""
    data.meta.set_meta(target, messages_off_at=str(time.time()) if off else None, messages_off_via=via if off else None)
    if off and data.window is not None:
        dropped = len(data.window.take_held(target))
        if dropped:
            log.info("messages.held_dropped", held=dropped)
    log.info("audit.messages_off" if off else "audit.messages_on", actor=_actor(actor), target=mask_phone(target),
             via=via)


def set_task_extraction(data: UserData, target: str, enabled: bool, actor: str, via: str) -> None:
    """Turn the task call before each reply on or off for one user (TASK_EXTRACTION=on only),
    and write the audit event."""
    data.meta.set_meta(target, **{TASK_OFF_FIELD: None if enabled else "1"})
    event = "audit.task_on" if enabled else "audit.task_off"
    log.info(event, actor=_actor(actor), target=mask_phone(target), via=via)


def erase_user(data: UserData, target: str, actor: str, via: str) -> int:
    """Delete every key of one user, facts and queued jobs included, and write the audit event."""
    tokens = data.store.trigger_tokens(target)  # the jobs they name go too, found without a SCAN
    if data.reminders is not None:
        data.reminders.forget(target)  # out of the due index; their jobs go with the user's jobs below
    deleted = erase_keys(data.redis, target)
    if data.index is not None:
        data.index.remove(target)
    purged = 0
    if data.jobs is not None:
        try:
            purged = data.jobs.purge_user(target, tokens)
        except Exception as err:  # the keys are gone; stale jobs will find nothing and write nothing
            log.error("erase.jobs_not_purged", error=f"{type(err).__name__}: {err}")
    log.info("audit.erase", actor=_actor(actor), target=mask_phone(target), via=via,
             keys_deleted=deleted, jobs_deleted=purged)
    return deleted
