"""Recognise user and operator commands in message text; nothing here touches storage.

A command is a whole message (case and punctuation ignored) that is one of its phrases in any
of the bot's languages (the catalogs, docs/languages.md), plus the phrases RESET_PHRASES and
TOPIC_SHIFT_PHRASES add; a topic shift may also start a longer message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.config import E164_PATTERN
from bot.conversation.catalog import Catalog, normalize

_OPERATOR_RESET = re.compile(rf"^#reset\s+(?:whatsapp:)?({E164_PATTERN})$")

#: The commands a user's own phrases ask for, in the order they are looked for.
USER_COMMANDS = ("erase", "opt_out", "opt_in", "messages_off", "messages_on", "task_off", "task_on", "help",
                 "reminders")


@dataclass(frozen=True)
class Command:
    """A recognised command: reset, topic_shift, opt_out, opt_in, messages_off, messages_on,
    erase, erase_confirm, task_off, task_on, help, reminders, or operator_reset of target."""

    kind: str
    target: str | None = None


def parse_phrases(raw: str) -> tuple[str, ...]:
    """Split a comma-separated setting into normalized phrases."""
    return tuple(p for p in (normalize(x) for x in raw.split(",")) if p)


@dataclass(frozen=True)
class CommandWords:
    """Every command's phrases, in every language, normalized."""

    phrases: dict[str, frozenset[str]]  # command -> phrases
    topic_prefixes: tuple[str, ...]

    @classmethod
    def build(cls, catalog: Catalog, reset_phrases: str = "", topic_phrases: str = "") -> "CommandWords":
        """Return the catalogs' phrases with the settings' extra reset and topic phrases."""
        phrases = {kind: frozenset(catalog.command_phrases(kind)) for kind in (*USER_COMMANDS, "confirm", "reset")}
        phrases["reset"] |= frozenset(parse_phrases(reset_phrases))
        topics = tuple(dict.fromkeys((*catalog.command_phrases("topic_shift"), *parse_phrases(topic_phrases))))
        return cls(phrases, topics)


def recognise(
    text: str,
    sender: str,
    words: CommandWords,
    *,
    operators: frozenset[str],
    erase_pending: bool = False,
) -> Command | None:
    """Return the command a message is, or None for an ordinary message."""
    norm = normalize(text)
    if not norm:
        return None
    if erase_pending and norm in words.phrases["confirm"]:
        return Command("erase_confirm")
    for kind in USER_COMMANDS:
        if norm in words.phrases[kind]:
            return Command(kind)
    if sender in operators:
        match = _OPERATOR_RESET.match(norm)
        if match:
            return Command("operator_reset", match.group(1))
    # A reset is the whole message, never a sentence that merely contains the words.
    if norm in words.phrases["reset"]:
        return Command("reset")
    for phrase in words.topic_prefixes:
        if norm == phrase or norm.startswith(phrase + " "):
            return Command("topic_shift")
    return None
