"""What the Twilio stand-in (bot/dev/twilio_standin.py) answers besides messages and media:
Twilio's error bodies, the Content API's templates with their WhatsApp approval (as
GET /v1/ContentAndApprovals lists them, so the console can offer them: docs/window.md,
Templates), and the feed of messages sent to one number. Never for production."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

#: Twilio's error codes for the statuses a test can force.
ERROR_CODES = {401: 20003, 403: 20003, 404: 20404, 429: 20429}

CONTENT_PATH = "/v1/ContentAndApprovals"
#: The account's templates, as the Content API lists them (bot/channels/twilio/templates.py reads them).
TEMPLATES = (
    {"sid": "HX" + "a1" * 16, "friendly_name": "appointment_reminder", "language": "en",
     "variables": {"1": "name", "2": "time"},
     "types": {"twilio/text": {"body": "Hi {{1}}, this is a reminder of your appointment at {{2}}. Reply to confirm."}},
     "approval_requests": {"name": "appointment_reminder", "category": "UTILITY", "status": "approved"}},
    {"sid": "HX" + "b2" * 16, "friendly_name": "resposta_pendente", "language": "pt",
     "variables": {"1": "nome"},
     "types": {"twilio/text": {"body": "Olá {{1}}, temos uma resposta para si. Responda a esta mensagem para a ver."}},
     "approval_requests": {"name": "resposta_pendente", "category": "UTILITY", "status": "approved"}},
    {"sid": "HX" + "c3" * 16, "friendly_name": "recordatorio", "language": "es",
     "variables": {"1": "texto"},
     "types": {"twilio/text": {"body": "Recordatorio: {{1}}"}},
     "approval_requests": {"name": "recordatorio", "category": "UTILITY", "status": "approved"}},
    {"sid": "HX" + "d4" * 16, "friendly_name": "summer_promo", "language": "en", "variables": {},
     "types": {"twilio/text": {"body": "Our summer offers are here!"}},
     "approval_requests": {"name": "summer_promo", "category": "MARKETING", "status": "pending"}},
)


def content_page(account_sid: str) -> dict[str, Any]:
    """Return one page of the account's templates, as the Content API answers."""
    rows = [{**t, "account_sid": account_sid, "date_created": "2026-01-05T10:00:00Z",
             "date_updated": "2026-01-05T10:00:00Z"} for t in TEMPLATES]
    return {"contents": rows, "meta": {"key": "contents", "page": 0, "page_size": 50, "first_page_url": None,
                                       "previous_page_url": None, "next_page_url": None, "url": None}}


def error(status: int, message: str) -> dict[str, Any]:
    """Return Twilio's JSON error body for this status."""
    code = ERROR_CODES.get(status, 20500)
    return {"code": code, "message": message, "more_info": f"https://www.twilio.com/docs/errors/{code}",
            "status": status}


def message_feed(messages: list[dict[str, str]], query: str) -> dict[str, Any]:
    """Return the messages sent to one number (`to`), from the `after`-th on, and how many."""
    args = parse_qs(query)
    to, after = (args.get("to") or [""])[0], (args.get("after") or ["0"])[0]
    mine = [m for m in messages if m.get("To") == to]
    start = int(after) if after.isdigit() else 0
    return {"messages": [{"body": m.get("Body", ""), "sid": m.get("Sid", "")} for m in mine[start:]],
            "total": len(mine)}
