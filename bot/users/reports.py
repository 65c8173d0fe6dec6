"""What is stored about users, as inspect, export and the users listing show it."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

from bot.config.tasks import Price
from bot.memory.extraction import stored_pairs
from bot.reminders.book import public
from bot.storage.triggers import SUMMARY
from bot.storage.facts import MODEL_FIELD
from bot.storage.keys import user_keys
from bot.storage.memory_meta import TASK_OFF_FIELD
from bot.storage.redelivery import seen_records
from bot.storage.users import key_report, scan_users
from bot.users.data import UserData
from bot.users.memory import memory_report


def iso(ts: float | None) -> str | None:
    """Return a Unix time as ISO 8601 in UTC, or None."""
    return datetime.fromtimestamp(ts, timezone.utc).isoformat() if ts else None


def user_report(data: UserData, user: str) -> dict[str, Any]:
    """Return everything stored about one user, as inspect prints it."""
    store = data.store
    context = store.load(user)
    pending = store.pending_pairs(user)
    jobs = data.jobs
    return {
        "user": user,
        "summary": context.summary,
        "recent_messages": [
            {"user": p.user, "assistant": p.assistant, "ts": p.ts, "sid": p.sid} for p in context.recent
        ],
        "message_count_since_summary": context.count_since_summary,
        "last_interaction_timestamp": context.last_interaction,
        "last_interaction": iso(context.last_interaction),
        "pending_pairs": [p.to_public() for p in pending],
        "last_task": context.last_task or None,
        "last_reference": context.last_reference or None,
        "task_extraction": "off" if data.meta.meta(user).get(TASK_OFF_FIELD) == "1" else "on",
        "summary_job": {
            "status": (
                jobs.job_status(jobs.job_id(SUMMARY, user, context.summary_job_token))
                if jobs is not None and context.summary_job_token
                else None
            ),
            "triggered_at": iso(context.summary_job_at),
            "failed_job_ids": jobs.failed_summaries(user) if jobs is not None else [],
        },
        "facts": memory_report(data, user),
        "fact_vectors": vector_report(data, user),
        "entities": entity_report(data, user),
        **handover_report(data, user),
        "deferred": deferred_report(data, user),
        **tools_report(data, user),
        **window_report(data, user),
        "reminders": reminders_report(data, user),
        "keys": key_report(data.redis, user_keys(user)),
    }


def deferred_report(data: UserData, user: str, with_text: bool = False) -> list[dict[str, Any]]:
    """Return the messages a worker is answering, oldest first: what kind, since when, and
    whether the reply is being sent (docs/deferred.md); their text only for the export."""
    if data.deferred is None:
        return []
    rows = []
    for queued in data.deferred.queued(user):
        at = queued.data.get("at")
        row = {"sid": queued.sid, "kind": queued.data.get("kind", ""), "at": at, "since": iso(at),
               "sending": queued.sending}
        if with_text:
            row["body"] = queued.data.get("body", "")
        rows.append(row)
    return rows


def window_report(data: UserData, user: str, with_text: bool = False) -> dict[str, Any]:
    """Return WhatsApp's 24-hour window (`window`: open, the user's last message, when it
    closes), the messages held until they write again (`held`: kind and since when; their
    text only for the export), the deliveries that failed (`delivery_failures`: Twilio's
    code, kind, when; newest first) and the user's STOP (`messages_off`: since when, and how:
    user or cli), or None."""
    failures = [{**f, "when": iso(f.get("at"))} for f in data.outbox.failures(user)] if data.outbox is not None else []
    meta = data.meta.meta(user)
    off = meta.get("messages_off_at")
    messages_off = {"since": iso(float(off)), "via": meta.get("messages_off_via", "")} if off else None
    if data.window is None:
        return {"window": None, "held": [], "delivery_failures": failures, "messages_off": messages_off}
    state = data.window.state(user)
    held = [{"kind": h.get("kind", ""), "at": h.get("at"), "since": iso(h.get("at")),
             **({"text": h.get("text", "")} if with_text else {})} for h in data.window.held(user)]
    return {"window": {"open": state.open, "last_inbound": iso(state.last_inbound), "closes_at": iso(state.closes_at),
                       "closes_ts": state.closes_at}, "held": held, "delivery_failures": failures,
            "messages_off": messages_off}


def reminders_report(data: UserData, user: str) -> list[dict[str, Any]]:
    """Return the user's reminders, soonest first (docs/reminders.md)."""
    return [public(r) for r in data.reminders.all(user)] if data.reminders is not None else []


def tools_report(data: UserData, user: str) -> dict[str, Any]:
    """Return the write waiting for the user's yes (`pending_action`) and their last tool
    calls, newest first (`tool_calls`: tool, arguments, outcome, status, duration, when; never the API's answer)."""
    if data.actions is None:
        return {"pending_action": None, "tool_calls": []}
    pending = data.actions.pending(user)
    calls = [{**call, "when": iso(call.get("at"))} for call in data.actions.calls(user)]
    return {"pending_action": {k: pending.get(k) for k in ("tool", "summary", "arguments", "at")} | {
        "since": iso(pending.get("at"))} if pending else None, "tool_calls": calls}


def handover_report(data: UserData, user: str) -> dict[str, Any]:
    """Return the takeover in force (None: the bot answers) and what was said during it,
    not yet folded into the conversation."""
    store = data.handover
    if store is None:
        return {"handover": None, "handover_log": []}
    handover = store.get(user)
    return {"handover": handover.to_public() if handover else None,
            "handover_log": [e.to_public() for e in store.entries(user)]}


def entity_report(data: UserData, user: str) -> list[dict[str, Any]]:
    """Return the user's entities, most mentioned first."""
    if data.entities is None:
        return []
    entities = data.entities.load(user).entities.values()
    return [e.to_public() for e in sorted(entities, key=lambda e: (-len(e.facts), e.key))]


def usage_report(data: UserData, user: str, prices: dict[str, Price] | None = None) -> list[dict[str, Any]]:
    """Return the user's model tokens by purpose and model, with the cost when priced."""
    if data.usage is None:
        return []
    return [{"purpose": u.purpose, "model": u.model, "calls": u.calls, "prompt_tokens": u.prompt_tokens,
             "completion_tokens": u.completion_tokens, "audio_seconds": u.seconds, "cost_usd": u.cost(prices or {})}
            for u in data.usage.load(user)]


def usage_totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Return usage_report's rows summed; the cost is None when a model has no price."""
    costs = [r["cost_usd"] for r in rows]
    return {
        "calls": sum(r["calls"] for r in rows),
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "completion_tokens": sum(r["completion_tokens"] for r in rows),
        "cost_usd": None if not rows or any(c is None for c in costs) else round(sum(costs), 6),
    }


def export_user(data: UserData, user: str) -> dict[str, Any]:
    """Return everything stored about one user, for a data access request."""
    context = data.store.load(user)
    recent = {p.n for p in context.recent}
    return {
        "user": user,
        "exported_at": time.time(),
        "conversation": {
            "summary": context.summary,
            # every stored pair once, oldest first: whether the prompt still shows it verbatim
            # (the recent window) and whether the summary already holds it
            "pairs": [
                {**p.to_public(), "in_recent_window": p.n in recent, "summarized": p.n <= context.summarized_seq}
                for p in stored_pairs(data.store, user)
            ],
            "message_count_since_summary": context.count_since_summary,
            "last_interaction_timestamp": context.last_interaction,
            "last_task": context.last_task or None,
        },
        "facts": memory_report(data, user),
        "fact_vectors": vector_report(data, user),
        "entities": entity_report(data, user),
        "usage": usage_report(data, user),
        **handover_report(data, user),
        "deferred": deferred_report(data, user, with_text=True),
        **tools_report(data, user),
        **window_report(data, user, with_text=True),
        "reminders": reminders_report(data, user),
        "recent_replies": seen_records(data.redis, user),
        "keys": key_report(data.redis, user_keys(user)),
    }


def vector_report(data: UserData, user: str) -> dict[str, Any]:
    """Return the user's fact vectors as stored: the model, and each fact's signs (1 bit per
    dimension of the embedding minus the model's center, base64; docs/semantic.md)."""
    stored = data.facts.load_vectors(user)
    model = stored.pop(MODEL_FIELD, None)
    return {"model": model, "encoding": "1 bit per dimension, base64", "vectors": stored}


def list_users(data: UserData) -> list[dict[str, Any]]:
    """Return every user with stored context, found with SCAN, newest activity first."""
    users = []
    for user, last in scan_users(data.redis):
        size = sum(k["bytes"] for k in key_report(data.redis, user_keys(user)))
        users.append({"user": user, "last_interaction": iso(last), "bytes": size})
    users.sort(key=lambda u: u["last_interaction"] or "", reverse=True)
    return users
