"""Settings of deferred replies (docs/deferred.md), mixed into Settings: a message whose work
cannot be promised inside Twilio's webhook is acknowledged at once and answered through the
Messages API by a worker, with a typing indicator."""

from __future__ import annotations

from pydantic import BaseModel, Field

#: Twilio's typing indicator shows for 25 s; the bot sends it again this often while it works.
TYPING_REFRESH_S = 20.0


class DeferredSettings(BaseModel):
    """Deferred-reply settings; each is documented in .env.example and docs/deferred.md."""

    # Answer voice notes (and photos that cannot be promised in time) from a worker, through
    # the Messages API. Needs TWILIO_ACCOUNT_SID; without it every message stays on the
    # webhook's clock, as before (said at startup).
    DEFERRED_REPLIES: bool = True
    # All one deferred message may take in the worker, download, transcription and model
    # included (each still bounded by its own timeout).
    DEFERRED_TURN_S: float = Field(default=120.0, ge=15.0, le=900.0)
    # How long "typing…" is kept up for one deferred message (refreshed every 20 s); 0: never shown.
    TYPING_MAX_S: float = Field(default=60.0, ge=0.0, le=600.0)
    # Where Twilio's Messaging v2 API is reached (typing indicators); a stand-in in tests.
    TWILIO_MESSAGING_BASE_URL: str = "https://messaging.twilio.com"

    @property
    def deferred_on(self) -> bool:
        """Return whether slow messages are deferred: asked for, and the Messages API usable."""
        sid = self.TWILIO_ACCOUNT_SID or ""  # type: ignore[attr-defined]
        return self.DEFERRED_REPLIES and sid.startswith("AC") and bool(self.TWILIO_AUTH_TOKEN)  # type: ignore[attr-defined]
