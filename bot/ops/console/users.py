"""The users list (search by number, pages) and one user's page: conversation, facts,
entities, usage, the last task, the handover, and the forms of every action; the export."""

from __future__ import annotations

import json
from typing import Any

import structlog
from flask import Blueprint, Response, render_template, request
from flask.typing import ResponseReturnValue

from bot.conversation.messages import PHOTO_MARK, SPOKEN_MARK
from bot.memory.rules import CATEGORIES
from bot.observability.logs import mask_phone
from bot.ops.console.auth import login_required
from bot.ops.console.handover import handover_view, reason
from bot.ops.console.helpers import actor, services, user_or_404
from bot.users.directory import row_cost, users_page
from bot.users.reports import export_user, usage_report, usage_totals, user_report

log = structlog.get_logger(__name__)

bp = Blueprint("users", __name__, url_prefix="/users")


@bp.get("")
@login_required
def index() -> ResponseReturnValue:
    """List users, newest activity first; ?q= searches by number, ?page= pages."""
    s = services()
    query = request.args.get("q", "").strip()[:20]
    page = users_page(s.users, query, request.args.get("page", 1, type=int) or 1)
    prices = s.settings.model_prices
    return render_template("console/users.html", page=page, query=query, cost=lambda row: row_cost(row, prices))


@bp.get("/<e164>")
@login_required
def user(e164: str) -> ResponseReturnValue:
    """Show everything stored about one user, with the actions."""
    target = user_or_404(e164)
    s = services()
    report = user_report(s.users, target)
    usage = usage_report(s.users, target, s.settings.model_prices)
    recent = [pair.to_public() for pair in s.store.load(target).recent]  # with their numbers
    older = [p for p in report["pending_pairs"] if p["n"] not in {pair["n"] for pair in recent}]
    facts = report["facts"]
    return render_template(
        "console/user.html",
        user=target,
        report=report,
        known=bool(report["keys"]),
        recent=[turn(p) for p in recent],
        older=[turn(p) for p in older],
        pending_total=len(report["pending_pairs"]),
        facts={"user": sort_facts(facts["user"]), "session": sort_facts(facts["session"])},
        categories=CATEGORIES,
        usage=usage,
        usage_total=usage_totals(usage),
        handover=handover_view(target),
        delivery_reason=lambda code: reason("failed", code),
        task_setting=s.settings.TASK_EXTRACTION,
        zone=s.reminders.time_zone(target).name if s.reminders is not None else None,
    )


@bp.get("/<e164>/export.json")
@login_required
def export(e164: str) -> ResponseReturnValue:
    """Download everything stored about the user as a JSON file (a data access request)."""
    target = user_or_404(e164)
    report = export_user(services().users, target)
    log.info("audit.export", actor=actor(), target=mask_phone(target), via="console")
    body = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
    name = f"export-{target.lstrip('+')}.json"
    return Response(body, mimetype="application/json",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


def turn(pair: dict[str, Any]) -> dict[str, Any]:
    """Return a stored pair for the page, its user side's kind told apart: a voice note's
    transcript ("🎤 …") or a photo ("[Photo] caption") is shown marked, the mark taken off."""
    said = pair["user"]
    kind = "text"
    if said.startswith(SPOKEN_MARK.strip()):
        kind, said = "voice", said.removeprefix(SPOKEN_MARK.strip()).strip()
    elif said.startswith(PHOTO_MARK):
        kind, said = "photo", said.removeprefix(PHOTO_MARK).strip()
    return {**pair, "kind": kind, "said": said}


def sort_facts(facts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Order facts as an operator reads them: most important first, then by key."""
    return sorted(facts, key=lambda f: (-f["importance"], f["key"]))
