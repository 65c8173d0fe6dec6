"""Settings of the users' reminders (docs/reminders.md), mixed into Settings."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ReminderSettings(BaseModel):
    """REMINDERS_* settings; each is documented in .env.example and docs/configuration.md."""

    # The reply model may set, list and cancel a user's reminders (three built-in tools, in the
    # same call as the business's tools: a message that asks nothing costs no extra call).
    REMINDERS: bool = True
    # Reminders waiting per user; one more is refused, and the user is told (a user's keys stay small).
    REMINDERS_MAX_PER_USER: int = Field(default=20, ge=1, le=100)
    # Days a sent, cancelled or undeliverable reminder stays listed after its time (then its key expires).
    REMINDERS_KEEP_DAYS: int = Field(default=7, ge=1, le=90)
