"""The command step: read the message's text and carry out a recognised command
(bot/conversation/commands.py recognises them, in any of the bot's languages): reset,
operator reset, opt-out and opt-in, STOP and START (the bot's own messages: docs/window.md),
/task:off and /task:on, help, /reminders (docs/reminders.md), the erase request and its
confirmation, a topic shift. Its replies are in the user's language (docs/languages.md)."""

from __future__ import annotations

import time
from datetime import datetime

import structlog

from bot.conversation import commands
from bot.conversation.commands import Command, CommandWords
from bot.conversation.messages import message_text
from bot.conversation.turn import Turn
from bot.conversation.catalog import Catalog
from bot.exceptions import StoreUnavailable
from bot.observability.metrics import MESSAGES
from bot.storage.context import Context
from bot.reminders.book import ReminderBook
from bot.reminders.zones import zone
from bot.users.data import UserData
from bot.users.lifecycle import erase_user, reset_conversation, set_messages_off, set_opt_out, set_task_extraction

log = structlog.get_logger(__name__)

#: Commands that change a user's memory settings or data.
MEMORY_COMMANDS = ("opt_out", "opt_in", "erase", "erase_confirm")


def carry_out(
    turn: Turn,
    command: Command | None,
    users: UserData,
    erase_confirm_s: int,
    memory_commands: bool,
    erase_requested_at: float | None,
    say: Catalog,
    reminders: ReminderBook | None = None,
) -> None:
    """Carry out the command, if the message is one, settling the reply in the user's
    language; raise StoreUnavailable when Redis cannot carry it out (nothing is pretended)."""
    user = turn.msg.user
    lang = turn.heard.language
    kind = command.kind if command is not None else None
    if turn.stored.claim is None and kind not in (None, "topic_shift", "help"):
        raise StoreUnavailable("Redis was unreachable at claim")
    if erase_requested_at is not None and kind != "erase_confirm" and memory_commands:
        try:
            users.meta.set_meta(user, erase_requested_at=None)  # anything but YES cancels
            log.info("erase.cancelled")
        except StoreUnavailable as err:  # the request lapses by itself after ERASE_CONFIRM_S
            log.error("store.unavailable", stage="erase_cancel", error=str(err))
    if kind in MEMORY_COMMANDS:
        _memory_command(turn, kind, users, erase_confirm_s, say)
    elif kind in ("messages_off", "messages_on"):
        set_messages_off(users, user, kind == "messages_off", actor=user, via="user")
        _done(turn, say.text(kind, lang), kind)
    elif kind in ("task_off", "task_on"):
        set_task_extraction(users, user, kind == "task_on", actor=user, via="user")
        _done(turn, say.text(kind, lang), kind)
    elif kind == "help":
        _done(turn, say.text("help", lang), "help")
    elif kind == "reminders":
        _done(turn, reminder_list(reminders, user, lang, say), "reminders")
    elif kind == "reset":
        reset_conversation(users, user, user, via="user")
        _done(turn, say.text("reset", lang), "reset")
    elif kind == "operator_reset" and command is not None and command.target:
        reset_conversation(users, command.target, user, via="operator")
        _done(turn, say.text("operator_reset", lang, target=command.target), "operator_reset")
    elif kind == "topic_shift" and turn.stored.claim is not None:
        # The old topic is not carried verbatim: answer from the summary alone, and
        # have the worker fold the old pairs into the summary now (hand-off).
        turn.found.topic_shift = True
        context = turn.stored.context
        turn.stored.context = Context(summary=context.summary, epoch=context.epoch)


def reminder_list(book: ReminderBook | None, user: str, lang: str | None, say: Catalog) -> str:
    """Return the user's coming reminders in their words and their time (docs/reminders.md)."""
    if book is None:
        return say.text("reminders_unavailable", lang)
    waiting = book.list(user)
    if not waiting:
        return say.text("reminders_none", lang)
    zone_name = waiting[0].tz
    weekdays = say.text("weekdays", lang).split(",")
    lines = []
    for reminder in waiting:
        moment = datetime.fromtimestamp(reminder.due, zone(reminder.tz))
        lines.append(say.text("reminder_line", lang, weekday=weekdays[moment.weekday()], day=f"{moment.day:02d}",
                              month=f"{moment.month:02d}", time=moment.strftime("%H:%M"), text=reminder.text))
    return say.text("reminders_list", lang, zone=zone_name, items="\n".join(lines))


def _memory_command(turn: Turn, kind: str, users: UserData, erase_confirm_s: int, say: Catalog) -> None:
    """Carry out opt-out, opt-in and erase."""
    user, lang = turn.msg.user, turn.heard.language
    if kind in ("opt_out", "opt_in"):
        set_opt_out(users, user, kind == "opt_out", actor=user, via="user", free_trigger=True)
        _done(turn, say.text(kind, lang), kind)
    elif kind == "erase":
        users.meta.set_meta(user, erase_requested_at=str(time.time()))
        minutes = max(1, erase_confirm_s // 60)
        _done(turn, say.text("erase_confirm", lang, minutes=minutes), "erase_requested")
    else:
        erase_user(users, user, user, via="user")
        turn.record.touch_context = False  # everything is gone: the commit must not write it back
        _done(turn, say.text("erased", lang), "erased")


def _done(turn: Turn, reply: str, reason: str) -> None:
    MESSAGES.labels(outcome="rejected", reason="command").inc()
    turn.settle(reply, reason=reason, status="command")


class CommandStep:
    """Read the message's text (or refuse it politely) and carry out a command if it is one."""

    name = "command"
    records = False
    reads = ("stored.claim", "stored.context", "heard.text", "heard.language")
    writes = ("heard.text", "stored.context", "found.topic_shift", "record.touch_context",
              "answer.reply", "answer.reason", "answer.status")

    def __init__(self, users: UserData, memory_commands: bool, catalog: Catalog, *, erase_confirm_s: int,
                 reset_phrases: str, topic_phrases: str, operators: frozenset[str],
                 reminders: ReminderBook | None = None) -> None:
        self.users = users
        self.memory_commands = memory_commands  # opt-out, opt-in and erase; off for the baseline
        self.catalog = catalog  # the bot's own words (docs/languages.md)
        self.erase_confirm_s = erase_confirm_s  # ERASE_CONFIRM_S
        self.words = CommandWords.build(catalog, reset_phrases, topic_phrases)
        self.operators = operators
        self.reminders = reminders  # /reminders lists them (None: REMINDERS off)

    def __call__(self, turn: Turn) -> None:
        if turn.msg.has_attachment:
            # The media step reads it; a caption or a transcript is never a command. Anything
            # but YES still cancels a pending erase.
            self._carry_out(turn, None)
            return
        turn.heard.text, reason = message_text(turn.msg)
        if turn.heard.text is None:
            if turn.stored.claim is not None:  # with Redis down nothing is counted as a rejected pair
                log.info("pair.rejected", reason=reason)
                MESSAGES.labels(outcome="rejected", reason=reason).inc()
            turn.settle(self.catalog.text("empty_message", turn.heard.language), reason=reason)
            return
        user = turn.msg.user
        requested = turn.stored.memory.erase_requested_at
        erase_pending = requested is not None and time.time() - requested < self.erase_confirm_s
        command = commands.recognise(turn.heard.text, user, self.words, operators=self.operators,
                                     erase_pending=erase_pending)
        kind = command.kind if command is not None else None
        if kind in MEMORY_COMMANDS and not self.memory_commands:
            kind = None  # the baseline has no memory: these are ordinary messages there
        self._carry_out(turn, command if kind else None)

    def _carry_out(self, turn: Turn, command: commands.Command | None) -> None:
        """Carry out the command (None: only cancel a pending erase); a Redis failure is
        said, never pretended."""
        kind = command.kind if command is not None else None
        try:
            carry_out(turn, command, self.users, self.erase_confirm_s, self.memory_commands,
                      turn.stored.memory.erase_requested_at, self.catalog, self.reminders)
        except StoreUnavailable as err:
            # Never pretend, and never hand a command to the model as a normal message.
            log.error("command.unavailable", command=kind, error=str(err))
            MESSAGES.labels(outcome="rejected", reason="command_unavailable").inc()
            turn.settle(self.catalog.text("command_unavailable", turn.heard.language), reason="command_unavailable",
                        status="degraded")
