"""Settings of the operator console and of human handover (docs/console.md), mixed into Settings."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator


class ConsoleSettings(BaseModel):
    """Console and handover settings; each is documented in .env.example and README."""

    # The key the console's session cookie is signed with (a secret derived from it);
    # required in production when ADMIN_TOKEN turns the console on.
    CONSOLE_SECRET: str | None = Field(default=None, min_length=16)
    # A console session lasts this long after sign-in.
    CONSOLE_SESSION_MINUTES: int = Field(default=60, ge=5, le=24 * 60)
    # Failed sign-ins allowed per operator name and address in CONSOLE_SIGNIN_WINDOW_S.
    CONSOLE_SIGNIN_LIMIT: int = Field(default=5, ge=1, le=100)
    CONSOLE_SIGNIN_WINDOW_S: int = Field(default=900, ge=60, le=86400)
    # How often a user's page asks for new messages during a handover (seconds).
    CONSOLE_POLL_S: int = Field(default=3, ge=1, le=60)
    # A takeover lasts this long unless handed back sooner; then the bot answers again.
    HANDOVER_TTL_HOURS: int = Field(default=24, ge=1, le=24 * 14)
    # Sent once, to the first message after a takeover; unset, the catalogs' text in the
    # user's language ("A person from our team will answer you here.", docs/languages.md).
    HANDOVER_NOTICE: str | None = Field(default=None, min_length=1, max_length=500)
    # The console's hourly and daily counters (messages answered, model usage) are kept this long.
    ACTIVITY_KEEP_DAYS: int = Field(default=8, ge=2, le=400)

    @field_validator("CONSOLE_SECRET", mode="before")
    @classmethod
    def _empty_secret(cls, value: object) -> object:
        return None if value == "" else value
