"""A message as the conversation sees it, and what came of it."""

from __future__ import annotations

from dataclasses import dataclass

from bot.conversation import filtering
from bot.media.location import Location


#: The stored pair's user side of a voice note starts with this, so inspect, export and the
#: summary know it was spoken.
SPOKEN_MARK = "🎤 "
#: ...and a photo's is "[Photo] caption".
PHOTO_MARK = "[Photo]"


@dataclass(frozen=True)
class MediaItem:
    """One attachment: its content type, and a reference only the channel can fetch."""

    content_type: str  # lower case, parameters kept: "audio/ogg; codecs=opus"
    ref: str = ""  # opaque to the conversation (Twilio: the Media URL)

    @property
    def family(self) -> str:
        """Return the type's family: audio, image, video, application, text."""
        return self.content_type.split("/", 1)[0].strip()

    @property
    def subtype(self) -> str:
        """Return the type without family or parameters: "ogg", "jpeg"."""
        return self.content_type.partition("/")[2].split(";", 1)[0].strip()


@dataclass(frozen=True)
class InboundMessage:
    """A WhatsApp message as the domain sees it, whatever transport carried it."""

    user: str  # E.164, e.g. +14155550100
    sid: str
    body: str
    media: tuple[MediaItem, ...] = ()
    location: Location | None = None
    profile_name: str = ""
    to: str = ""  # the number the user wrote to (whatsapp:+E164): a reply sent by API goes from it
    received_at: float = 0.0  # Unix seconds the webhook got it (a deferred message's); 0: now

    @property
    def media_types(self) -> tuple[str, ...]:
        """Return the attachments' content types."""
        return tuple(item.content_type for item in self.media)

    @property
    def has_location(self) -> bool:
        """Return whether the user shared a location."""
        return self.location is not None

    @property
    def has_attachment(self) -> bool:
        """Return whether the message carries media or a location (the media step reads it)."""
        return bool(self.media) or self.location is not None


@dataclass
class Outcome:
    """What to answer and what happened, for the transport and the logs."""

    reply: str
    status: str  # answered, duplicate, inflight, degraded, command
    reason: str = filtering.REASON_OK
    stored: bool = False
    count_since_summary: int | None = None
    model_s: float = 0.0
    prompt_tokens: int = 0
    seq: int | None = None  # the user's latest stored pair number after this message


def message_text(msg: InboundMessage) -> tuple[str | None, str]:
    """Return a typed message's text, or None and the reason when it is empty (an
    attachment's text is the media step's to find)."""
    body = msg.body.strip()
    if body:
        return body, filtering.REASON_OK
    return None, filtering.REASON_EMPTY_MESSAGE
