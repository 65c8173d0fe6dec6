"""A message as the conversation sees it, and what came of it."""

from __future__ import annotations

from dataclasses import dataclass

from bot.conversation import filtering
from bot.conversation.replies import media_placeholder


@dataclass(frozen=True)
class InboundMessage:
    """A WhatsApp message as the domain sees it, whatever transport carried it."""

    user: str  # E.164, e.g. +14155550100
    sid: str
    body: str
    media_types: tuple[str, ...] = ()
    has_location: bool = False
    profile_name: str = ""
    to: str = ""  # the number the user wrote to (whatsapp:+E164): a reply sent by API goes from it


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


def message_text(msg: InboundMessage, placeholders: bool) -> tuple[str | None, str]:
    """Return the text that enters the prompt, or None and the reason it can't (media only,
    unless `placeholders` stand for it: MEDIA_PLACEHOLDERS)."""
    body = msg.body.strip()
    has_media = bool(msg.media_types) or msg.has_location
    if has_media and placeholders:
        placeholder = media_placeholder(msg.media_types, msg.has_location)
        return (f"{placeholder} {body}".strip(), filtering.REASON_OK)
    if body:
        return body, filtering.REASON_OK
    if has_media:
        return None, filtering.REASON_NON_TEXT
    return None, filtering.REASON_EMPTY_MESSAGE
