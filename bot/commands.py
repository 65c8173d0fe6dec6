"""Recognise user and operator commands in message text; nothing here touches storage."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NOT_WORD = re.compile(r"[^\w\s/#+]")
_SPACES = re.compile(r"\s+")
_OPERATOR_RESET = re.compile(r"^#reset\s+(?:whatsapp:)?(\+[1-9]\d{6,14})$")

DEFAULT_RESET_PHRASES = ("forget everything", "clear chat", "start over", "/reset")
DEFAULT_TOPIC_PHRASES = ("new topic", "change of subject")


@dataclass(frozen=True)
class Command:
    """A recognised command: reset (own context), topic_shift, or operator_reset of target."""

    kind: str
    target: str | None = None


def normalize(text: str) -> str:
    """Lower-case, drop punctuation (keeping / # +) and collapse white space."""
    return _SPACES.sub(" ", _NOT_WORD.sub(" ", text.lower())).strip()


def parse_phrases(raw: str) -> tuple[str, ...]:
    """Split a comma-separated setting into normalized phrases."""
    return tuple(p for p in (normalize(x) for x in raw.split(",")) if p)


def recognise(
    text: str,
    sender: str,
    *,
    reset_phrases: tuple[str, ...],
    topic_phrases: tuple[str, ...],
    operators: frozenset[str],
) -> Command | None:
    """Return the command a message is, or None for an ordinary message."""
    norm = normalize(text)
    if not norm:
        return None
    if sender in operators:
        match = _OPERATOR_RESET.match(norm)
        if match:
            return Command("operator_reset", match.group(1))
    # A reset is the whole message, never a sentence that merely contains the words.
    if norm in reset_phrases:
        return Command("reset")
    for phrase in topic_phrases:
        if norm == phrase or norm.startswith(phrase + " "):
            return Command("topic_shift")
    return None
