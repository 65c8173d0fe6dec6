"""Human handover: take a conversation over, answer as a person, hand it back.

The console, the CLI and the admin API call these same functions. While a person holds the
conversation the message path logs the user's messages instead of answering
(bot/conversation/steps/handover.py). At hand-back, or at the first message after the takeover's
TTL, the log is folded into pairs stored through the normal commit path, so the recent window,
the summary and fact extraction know what the user and the person said.
"""

from __future__ import annotations

import time
import uuid
from typing import Callable

import structlog

from bot.exceptions import StoreUnavailable
from bot.jobs.handoff import hand_off
from bot.observability.logs import mask_phone
from bot.storage.handover import PERSON, USER, Handover, HandoverStore, LogEntry
from bot.storage.context import CommitRecord
from bot.storage.records import STORED_TEXT_CHARS, Pair, clip
from bot.users.data import UserData
from bot.users.memory import OperationError

log = structlog.get_logger(__name__)

#: WhatsApp takes at most this many characters in one message (Twilio refuses longer bodies).
REPLY_MAX_CHARS = 1600
#: The user side of a pair whose person spoke first.
NO_MESSAGE = "(no message)"
#: The assistant side of the user's last messages, when nobody answered them.
NOT_ANSWERED = "(not answered by the team)"
#: The person's side of a pair starts with this, so the model and the summary know who said it.
PERSON_MARK = "👤"

#: send(user, from_, text) -> (the message's sid or None, Twilio's error code or None): the
#: channel's sender (bot/channels/twilio/sender.py MessageSender.send).
Send = Callable[[str, str, str], tuple[str | None, str | None]]
#: send_template(user, from_, content sid, variables, text) -> the same (MessageSender.send_template).
SendTemplate = Callable[[str, str, str, dict[str, str], str], tuple[str | None, str | None]]
#: A template's variable: a name, a time, an order number (WhatsApp refuses long ones).
TEMPLATE_VARIABLE_MAX_CHARS = 200


def _actor(actor: str) -> str:
    return mask_phone(actor) if actor.startswith("+") else actor


def take_over(data: UserData, store: HandoverStore, user: str, actor: str, via: str) -> Handover:
    """Pause the bot for this user until hand-back or HANDOVER_TTL_HOURS, and write the
    audit event; actor is `console:<name>`, `cli` or `admin_api`. A change the bot proposed
    is forgotten: the person decides now (docs/tools.md)."""
    handover = store.take(user, actor)
    if data.actions is not None:
        data.actions.forget(user)
    log.info("audit.handover_taken", actor=_actor(actor), target=mask_phone(user), via=via,
             expires_at=handover.expires_at)
    return handover


def hand_back(data: UserData, store: HandoverStore, user: str, actor: str, via: str) -> int:
    """Let the bot answer again, fold the log into the conversation and write the audit
    event; return the pairs stored."""
    was_on = store.release(user)
    stored = fold(data, store, user)
    log.info("audit.handover_returned", actor=_actor(actor), target=mask_phone(user), via=via,
             was_on=was_on, pairs=stored)
    return stored


def operator_reply(
    data: UserData, store: HandoverStore, send: Send, user: str, text: str, operator: str
) -> LogEntry:
    """Send a person's message to the user, from the number they wrote to, and log it with
    its sid and status ("sent"; "held" outside the user's window, sent when they write; or
    "failed" with Twilio's error code). Raise OperationError
    for an empty or too long text, without a takeover, or when the user never wrote."""
    text = text.strip()
    if not 1 <= len(text) <= REPLY_MAX_CHARS:
        raise OperationError(f"a reply must be 1 to {REPLY_MAX_CHARS} characters")
    from_ = _reply_from(data, store, user)
    return _logged(store, user, text, operator, *send(user, from_, text), kind="reply")


def operator_template(data: UserData, store: HandoverStore, send_template: SendTemplate, user: str, sid: str,
                      variables: dict[str, str], text: str, operator: str) -> LogEntry:
    """Send an approved template to the user (docs/window.md: what a person may send once the
    window is closed), its variables filled, and log it with what the user reads. Raise
    OperationError as operator_reply does, and for a variable left empty or too long."""
    if any(not v.strip() or len(v) > TEMPLATE_VARIABLE_MAX_CHARS for v in variables.values()):
        raise OperationError(f"fill every variable of the template (at most {TEMPLATE_VARIABLE_MAX_CHARS} characters)")
    from_ = _reply_from(data, store, user)
    values = {k: v.strip() for k, v in variables.items()}
    return _logged(store, user, text, operator, *send_template(user, from_, sid, values, text), kind="template")


def _reply_from(data: UserData, store: HandoverStore, user: str) -> str:
    """Return the number a person answers from; raise OperationError without a takeover, or
    when the user never wrote."""
    if store.get(user) is None:
        raise OperationError("take the conversation over before answering: the bot is answering this user")
    from_ = data.store.load(user).reply_from
    if not from_:
        raise OperationError("this user has not written since replies by a person became possible: "
                             "there is no number to answer from")
    return from_


def _logged(store: HandoverStore, user: str, text: str, operator: str, sid: str | None, code: str | None,
            kind: str) -> LogEntry:
    """Log a person's message with what came of sending it, and write the audit event."""
    held = sid is None and code == "held"  # outside the user's 24-hour window: sent when they write (docs/window.md)
    entry = LogEntry(PERSON, text, time.time(), by=operator, sid=sid or "",
                     status="sent" if sid else "held" if held else "failed", code="" if sid or held else code or "")
    store.append(user, entry)
    log.info("audit.handover_reply", actor=f"console:{operator}", target=mask_phone(user), via="console",
             chars=len(text), status=entry.status, error_code=entry.code or None, kind=kind)
    return entry


def pairs_from_log(entries: list[LogEntry]) -> list[Pair]:
    """Turn a handover log into pairs: each person's message answers the user's messages
    before it (joined by newlines); the user's last messages, if nobody answered them, make a
    pair of their own. A person's message that was never delivered is left out: the user
    never read it."""
    pairs: list[Pair] = []
    waiting: list[LogEntry] = []
    for entry in entries:
        if entry.role == USER:
            waiting.append(entry)
        elif entry.delivered:
            said = "\n".join(e.text for e in waiting) or NO_MESSAGE
            answer = f"{PERSON_MARK} {entry.by or 'team'}: {entry.text}"
            pairs.append(Pair(clip(said, STORED_TEXT_CHARS), clip(answer, STORED_TEXT_CHARS), entry.ts))
            waiting = []
    if waiting:
        said = "\n".join(e.text for e in waiting)
        pairs.append(Pair(clip(said, STORED_TEXT_CHARS), NOT_ANSWERED, waiting[-1].ts))
    return pairs


def fold(data: UserData, store: HandoverStore, user: str) -> int:
    """Store the handover log as pairs of the conversation, through the commit path (so the
    summary and fact extraction see them, their jobs queued as after a message), and delete
    it; return the pairs stored. The log is taken atomically: two folds never store it twice."""
    entries = store.take_log(user)
    pairs = pairs_from_log(entries)
    stored = 0
    for pair in pairs:
        sid = "HO" + uuid.uuid4().hex
        try:
            claim = data.store.claim(user, sid)
            result = data.store.commit(CommitRecord(user, claim, sid, "", pair))
        except StoreUnavailable as err:
            log.error("handover.fold_failed", pairs_left=len(pairs) - stored, error=str(err))
            raise
        stored += int(result.pair_stored)
        if data.jobs is not None:
            for kind, token in result.due.items():
                hand_off(data.jobs, data.store, kind, user, token)
    if entries:
        log.info("handover.folded", entries=len(entries), pairs=stored)
    return stored
