"""Settings of WhatsApp's 24-hour window (docs/window.md), mixed into Settings."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
