"""Settings of WhatsApp's 24-hour window (docs/window.md), mixed into Settings."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field, field_validator

_TEMPLATE = re.compile(r"^[a-z0-9_]{1,40}=HX[0-9a-fA-F]{32}$")


class WindowSettings(BaseModel):
    """WHATSAPP_WINDOW_S and the templates; each is documented in .env.example and docs/configuration.md."""

    # WhatsApp delivers free text only this long after the user's last message (24 h; tests shorten it).
    WHATSAPP_WINDOW_S: int = Field(default=86_400, ge=10, le=86_400)
    # The approved template (a Twilio Content SID, HX…) sent when a message is held outside the
    # window: "we have an answer for you, reply to see it". Unset: the message waits, silently.
    TEMPLATE_REOPEN_SID: str | None = Field(default=None, pattern=r"^HX[0-9a-fA-F]{32}$")
    # The approved template a reminder goes through outside the window, its text as variable
    # {{1}} (docs/reminders.md). Unset: a reminder due outside the window cannot be delivered,
    # and the user is told so when they set it.
    TEMPLATE_REMINDER_SID: str | None = Field(default=None, pattern=r"^HX[0-9a-fA-F]{32}$")
    # Templates an operator may send from the console when the window is closed, by name:
    # "follow_up=HX…,order_ready=HX…". The account's approved templates are offered too, where
    # its credentials can list them (the Content API).
    TEMPLATES: str = ""
    # Twilio's Content API (the account's templates and their WhatsApp approval).
    TWILIO_CONTENT_BASE_URL: str = "https://content.twilio.com"

    @field_validator("TEMPLATES")
    @classmethod
    def _templates(cls, value: str) -> str:
        for item in (v.strip() for v in value.split(",") if v.strip()):
            if not _TEMPLATE.match(item):
                raise ValueError(f"{item[:60]!r}: each template is name=HX followed by 32 hex digits")
        return value

    @property
    def operator_templates(self) -> dict[str, str]:
        """Return TEMPLATES as name -> Content SID."""
        return dict(item.strip().split("=", 1) for item in self.TEMPLATES.split(",") if item.strip())
