"""Operator HTTP API under /admin, behind `Authorization: Bearer $ADMIN_TOKEN`."""

from __future__ import annotations

import structlog
from flask import Blueprint, abort, jsonify, request
from flask.typing import ResponseReturnValue

from bot.memory.rules import normalize_key
from bot.observability.logs import mask_phone
from bot.ops.api import guard, json_body, json_flag, services, user_param
from bot.users import memory as operations
from bot.users.handover import hand_back, take_over
from bot.users.lifecycle import erase_user, reset_conversation, set_opt_out, set_task_extraction
from bot.users.memory import OperationError
from bot.users.reports import entity_report, export_user, handover_report

log = structlog.get_logger(__name__)

bp = Blueprint("admin", __name__, url_prefix="/admin")
guard(bp)


@bp.post("/users/<e164>/reset")
def reset_user(e164: str) -> ResponseReturnValue:
    """Clear one user's conversation (not their facts)."""
    user = user_param(e164)
    existed = reset_conversation(services().users, user, "admin_api", via="admin_api")
    return jsonify(user=user, reset=True, existed=existed)


@bp.errorhandler(OperationError)
def operation_error(err: OperationError) -> ResponseReturnValue:
    """Turn a bad operator request into a 400 with the reason."""
    return jsonify(error=str(err)), 400


@bp.get("/users/<e164>/facts")
def list_facts(e164: str) -> ResponseReturnValue:
    """Return the user's facts (user and session scope), settings and counters."""
    return jsonify(operations.memory_report(services().users, user_param(e164)))


@bp.put("/users/<e164>/facts/<key>")
def put_fact(e164: str, key: str) -> ResponseReturnValue:
    """Create or replace a fact as an operator: {"value": …, "category"?, "importance"?, "scope"?}."""
    body = json_body()
    fact = operations.set_fact(
        services().users,
        services().settings,
        user_param(e164),
        key,
        str(body.get("value", "")),
        category=str(body["category"]) if body.get("category") else None,  # None: from the key
        importance=body.get("importance", 0.8),
        scope=str(body.get("scope", "user")),
        actor="admin_api",
    )
    return jsonify(fact.to_public())


@bp.delete("/users/<e164>/facts/<key>")
def remove_fact(e164: str, key: str) -> ResponseReturnValue:
    """Delete one fact (?scope=session for a session fact)."""
    scope = request.args.get("scope", "user")
    if scope not in operations.SCOPES:
        abort(400, description="scope must be user or session")
    existed = operations.delete_fact(services().users, user_param(e164), key, scope, actor="admin_api")
    return jsonify(deleted=existed), 200 if existed else 404


@bp.get("/users/<e164>/memory/context")
def memory_context(e164: str) -> ResponseReturnValue:
    """Return the PERSISTENT MEMORY block that would be injected for ?request=…"""
    s = services()
    selection = operations.preview_selection(s.users, s.settings, s.counter, user_param(e164), request.args.get("request", ""))
    return jsonify(operations.selection_report(selection))


@bp.put("/users/<e164>/task")
def task_setting(e164: str) -> ResponseReturnValue:
    """Turn the task call before each reply on or off for one user: {"enabled": true|false}."""
    enabled = json_flag("enabled")
    user = user_param(e164)
    set_task_extraction(services().users, user, enabled, actor="admin_api", via="admin_api")
    return jsonify(user=user, task_extraction="on" if enabled else "off")


@bp.put("/users/<e164>/handover")
def handover_setting(e164: str) -> ResponseReturnValue:
    """Take the conversation over for a person, or hand it back: {"active": true|false}."""
    active = json_flag("active")
    user = user_param(e164)
    s = services()
    if active:
        handover = take_over(s.users, s.handover, user, actor="admin_api", via="admin_api")
        return jsonify(user=user, active=True, handover=handover.to_public())
    pairs = hand_back(s.users, s.handover, user, actor="admin_api", via="admin_api")
    return jsonify(user=user, active=False, pairs_stored=pairs)


@bp.get("/users/<e164>/handover")
def handover_state(e164: str) -> ResponseReturnValue:
    """Return the takeover in force (null: the bot answers) and the messages of the handover."""
    user = user_param(e164)
    report = handover_report(services().users, user)
    return jsonify(user=user, active=report["handover"] is not None, **report)


@bp.get("/users/<e164>/entities")
def entities(e164: str) -> ResponseReturnValue:
    """Return the user's entities: names, aliases, the facts naming them, RELATED edges."""
    user = user_param(e164)
    return jsonify(user=user, entities=entity_report(services().users, user))


@bp.get("/users/<e164>/memory/conflicts")
def memory_conflicts(e164: str) -> ResponseReturnValue:
    """Return the facts that hold a rival value."""
    return jsonify(conflicts=operations.conflicts(services().users, user_param(e164)))


@bp.post("/users/<e164>/memory/select")
def memory_select(e164: str) -> ResponseReturnValue:
    """Select facts for {"request": …, "max_tokens"?: n} and explain each choice."""
    body = json_body()
    max_tokens = body.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or not 50 <= max_tokens <= 2000):
        abort(400, description="max_tokens must be a whole number from 50 to 2000")
    s = services()
    request_text = str(body.get("request", ""))
    selection = operations.preview_selection(s.users, s.settings, s.counter, user_param(e164), request_text, max_tokens)
    # what the knowledge base would add beside the memory block, and why (not the user's data)
    knowledge = s.retriever.preview(request_text).to_public() if request_text.strip() else None
    return jsonify({**operations.selection_report(selection), "knowledge": knowledge})


@bp.put("/users/<e164>/memory/settings")
def memory_settings(e164: str) -> ResponseReturnValue:
    """Turn extraction off or on: {"opted_out": true|false}."""
    opted_out = json_flag("opted_out")
    user = user_param(e164)
    set_opt_out(services().users, user, opted_out, actor="admin_api", via="admin_api")
    return jsonify(user=user, opted_out=opted_out)


@bp.get("/users/<e164>/export")
def export(e164: str) -> ResponseReturnValue:
    """Return all of the user's data as JSON."""
    user = user_param(e164)
    log.info("audit.export", actor="admin_api", target=mask_phone(user))
    return jsonify(export_user(services().users, user))


@bp.post("/users/<e164>/erase")
def erase(e164: str) -> ResponseReturnValue:
    """Delete every key of the user, facts included."""
    user = user_param(e164)
    deleted = erase_user(services().users, user, "admin_api", via="admin_api")
    return jsonify(user=user, erased=True, keys_deleted=deleted)


@bp.get("/org/facts")
def org_facts() -> ResponseReturnValue:
    """Return the org-scope facts."""
    return jsonify(facts=[f.to_public() for f in services().facts.org_facts(fresh=True).values()])


@bp.put("/org/facts")
def put_org_facts() -> ResponseReturnValue:
    """Add or replace org facts: {"key": "value" | {"value", "category", "importance"}}."""
    parsed = operations.parse_org_facts(json_body())
    services().facts.set_org_facts(parsed)
    log.info("audit.org_facts_set", actor="admin_api", keys=sorted(parsed))
    return jsonify(stored=sorted(parsed))


@bp.delete("/org/facts/<key>")
def delete_org_fact(key: str) -> ResponseReturnValue:
    """Delete one org fact."""
    existed = services().facts.delete_org_fact(normalize_key(key))
    log.info("audit.org_fact_deleted", actor="admin_api", key=key, existed=existed)
    return jsonify(deleted=existed), 200 if existed else 404
