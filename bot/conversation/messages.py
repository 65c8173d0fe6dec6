"""A message as the conversation sees it, and what came of it."""

from __future__ import annotations

from dataclasses import dataclass

from bot.conversation import filtering


@dataclass(frozen=True)
class InboundMessage:
    """A WhatsApp message as the domain sees it, whatever transport carried it."""

    user: str  # E.164, e.g. +14155550100
    sid: str
    body: str
    media_types: tuple[str, ...] = ()
    has_location: bool = False
    profile_name: str = ""


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
