"""The approved templates an operator may send when a user's 24-hour window is closed
(docs/window.md, Templates): those the settings name (TEMPLATES, TEMPLATE_REOPEN_SID,
TEMPLATE_REMINDER_SID) and, where the account's credentials can list them, the account's
own through Twilio's Content API (GET /v1/ContentAndApprovals, with each one's WhatsApp
approval), read with the twilio SDK and kept for LIST_TTL_S.

A template the API lists is offered only when WhatsApp approved it; one the settings name is
offered as the operator configured it (its text and variables known when the API lists it).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import structlog
from twilio.rest import Client

from bot.config import Settings

log = structlog.get_logger(__name__)

#: How long the account's list is kept before it is asked again.
LIST_TTL_S = 300
#: The most templates read from the account (one page).
LIST_LIMIT = 50
_VARIABLE = re.compile(r"\{\{\s*([0-9A-Za-z_]+)\s*\}\}")


@dataclass(frozen=True)
class Template:
    """One template: its Content SID, a name, its text with {{n}} placeholders (if known),
    its variables (name -> example), and where it came from (settings, account)."""

    sid: str
    name: str
    body: str = ""
    variables: dict[str, str] = field(default_factory=dict)
    language: str = ""
    source: str = "settings"

    @property
    def fields(self) -> dict[str, str]:
        """Return the variables an operator fills (name -> example): its own, or one optional
        {{1}} when its text is unknown (a configured template the account did not list)."""
        return self.variables or ({} if self.body else {"1": ""})

    def render(self, values: dict[str, str]) -> str:
        """Return the text the user will read, its variables filled ("[template name]" when
        its text is unknown)."""
        if not self.body:
            return f"[template {self.name}]" + (f" {', '.join(values.values())}" if values else "")
        return _VARIABLE.sub(lambda m: values.get(m.group(1), m.group(0)), self.body)


def _body(types: Any) -> str:
    """Return a content's text, from its first type that has a body (twilio/text, twilio/card…)."""
    if not isinstance(types, dict):
        return ""
    for spec in types.values():
        if isinstance(spec, dict) and isinstance(spec.get("body"), str):
            return spec["body"]
    return ""


def _approved(requests: Any) -> bool:
    """Return whether WhatsApp approved the content (approval_requests' status)."""
    if not isinstance(requests, dict):
        return False
    status = requests.get("status") or (requests.get("whatsapp") or {}).get("status")
    return str(status).lower() == "approved"


class TemplateCatalog:
    """The templates an operator may send: the configured ones and the account's approved ones."""

    def __init__(self, client: Client | None, settings: Settings) -> None:
        self.client = client  # None: no account (only the configured templates are known)
        configured = {**settings.operator_templates}
        if settings.TEMPLATE_REOPEN_SID:
            configured.setdefault("reopen", settings.TEMPLATE_REOPEN_SID)
        if settings.TEMPLATE_REMINDER_SID:
            configured.setdefault("reminder", settings.TEMPLATE_REMINDER_SID)
        self.configured = configured  # name -> Content SID
        self._lock = threading.Lock()
        self._listed: tuple[float, dict[str, Template], str] | None = None  # when, by sid, error

    def _account(self) -> tuple[dict[str, Template], str]:
        """Return the account's approved templates by sid, and why they could not be read ("")."""
        if self.client is None:
            return {}, "no Twilio account (TWILIO_ACCOUNT_SID)"
        with self._lock:
            if self._listed is not None and time.monotonic() - self._listed[0] < LIST_TTL_S:
                return self._listed[1], self._listed[2]
        found: dict[str, Template] = {}
        error = ""
        try:
            for item in self.client.content.v1.content_and_approvals.list(limit=LIST_LIMIT):
                if not item.sid or not _approved(item.approval_requests):
                    continue
                variables = {str(k): str(v) for k, v in (item.variables or {}).items()}
                found[item.sid] = Template(item.sid, item.friendly_name or item.sid, _body(item.types), variables,
                                           item.language or "", "account")
        except Exception as err:  # the console still offers the configured templates, and says why
            error = f"{type(err).__name__}: {str(err)[:160]}"
            log.warning("templates.list_failed", error=error)
        with self._lock:
            self._listed = (time.monotonic(), found, error)
        return found, error

    def all(self) -> tuple[list[Template], str]:
        """Return every template to offer, configured first, and why the account's could not
        be listed ("": they were)."""
        listed, error = self._account()
        out: dict[str, Template] = {}
        for name, sid in self.configured.items():
            known = listed.get(sid)
            out[sid] = Template(sid, name, known.body, known.variables, known.language, "settings") if known \
                else Template(sid, name)
        for sid, template in listed.items():
            out.setdefault(sid, template)
        return list(out.values()), error

    def get(self, sid: str) -> Template | None:
        """Return the template with this Content SID, if it is one to offer."""
        return next((t for t in self.all()[0] if t.sid == sid), None)
