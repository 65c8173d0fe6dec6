"""Which exchanges count as context (docs/conversation.md): only complete, real answers."""

from __future__ import annotations

from dataclasses import dataclass

#: Reasons a pair is kept out of context; each is logged and counted.
REASON_OK = "ok"
REASON_MODEL_ERROR = "model_error"
REASON_INCOMPLETE = "incomplete_reply"
REASON_EMPTY = "empty_reply"
REASON_REPHRASE = "rephrase_reply"
REASON_TOO_SHORT = "too_short"
REASON_NON_TEXT = "non_text"
REASON_EMPTY_MESSAGE = "empty_message"


@dataclass(frozen=True)
class Verdict:
    """Whether a pair enters context, and why."""

    valid: bool
    reason: str


def judge_pair(
    user_text: str,
    reply: str | None,
    finish_reason: str | None,
    *,
    min_chars: int,
    rephrase_phrases: tuple[str, ...],
) -> Verdict:
    """Decide whether a user message and the bot's reply form a valid context pair."""
    if reply is None:
        return Verdict(False, REASON_MODEL_ERROR)
    if not reply.strip():
        return Verdict(False, REASON_EMPTY)
    if finish_reason != "stop":
        return Verdict(False, REASON_INCOMPLETE)
    lowered = reply.lower()
    if any(phrase in lowered for phrase in rephrase_phrases):
        return Verdict(False, REASON_REPHRASE)
    if len(user_text.strip()) + len(reply.strip()) < min_chars:
        return Verdict(False, REASON_TOO_SHORT)
    return Verdict(True, REASON_OK)
