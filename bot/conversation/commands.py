"""Recognise user and operator commands in message text; nothing here touches storage."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.config import E164_PATTERN

_NOT_WORD = re.compile(r"[^\w\s/#+]")
_SPACES = re.compile(r"\s+")
_OPERATOR_RESET = re.compile(rf"^#reset\s+(?:whatsapp:)?({E164_PATTERN})$")

DEFAULT_RESET_PHRASES = ("forget everything", "clear chat", "start over", "/reset")
DEFAULT_TOPIC_PHRASES = ("new topic", "change of subject")
#: Memory commands (whole messages, case and punctuation ignored).
OPT_OUT_PHRASES = ("stop remembering me", "dont remember me", "do not remember me", "/stopmemory")
OPT_IN_PHRASES = ("remember me again", "start remembering me", "/remember")
ERASE_PHRASES = ("delete my data", "erase my data", "delete all my data", "erase all my data", "/deletedata")
#: Task extraction for this user (":" is punctuation to normalize: "/task:off" is "/task off").
TASK_OFF_PHRASES = ("/task off", "/taskoff")
TASK_ON_PHRASES = ("/task on", "/taskon")
CONFIRM_PHRASES = ("yes", "yes delete", "yes delete my data", "yes erase", "confirm")


@dataclass(frozen=True)
class Command:
    """A recognised command: reset, topic_shift, opt_out, opt_in, erase, erase_confirm,
    task_off, task_on, or operator_reset of target."""

    kind: str
    target: str | None = None


def normalize(text: str) -> str:
    """Lower-case, drop punctuation (keeping / # +) and collapse white space."""
    text = text.lower().replace("'", "").replace("\u2019", "")  # "don't" -> "dont"
    return _SPACES.sub(" ", _NOT_WORD.sub(" ", text)).strip()


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
    erase_pending: bool = False,
) -> Command | None:
    """Return the command a message is, or None for an ordinary message."""
    norm = normalize(text)
    if not norm:
        return None
    if erase_pending and norm in CONFIRM_PHRASES:
        return Command("erase_confirm")
    if norm in ERASE_PHRASES:
        return Command("erase")
    if norm in OPT_OUT_PHRASES:
        return Command("opt_out")
    if norm in OPT_IN_PHRASES:
        return Command("opt_in")
    if norm in TASK_OFF_PHRASES:
        return Command("task_off")
    if norm in TASK_ON_PHRASES:
        return Command("task_on")
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
