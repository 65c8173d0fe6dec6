"""The handover step: while a person holds the conversation, the bot does not answer.

It runs after `media` (so a voice note reaches the person as its transcript, a photo as its
caption) and before `entities`: a message during a handover is logged for the person
(bot/storage/handover.py), the first one after the takeover gets the handover notice (in the
user's language, or HANDOVER_NOTICE as the operator wrote it), the rest
no reply at all, and no model is called. Claim and deduplication ran before it, so a
redelivery is never logged twice. When the takeover's TTL has lapsed with a log left over, the
log is folded into the conversation first, so this reply's prompt knows what was said.
"""

from __future__ import annotations

import time

import structlog

from bot.conversation.catalog import Catalog
from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.storage.handover import USER, HandoverStore, LogEntry
from bot.users.data import UserData
from bot.users.handover import fold

log = structlog.get_logger(__name__)

#: The status and reason of a message a person is to answer.
HANDOVER = "handover"


class HandoverStep:
    """Log the message for the person holding the conversation, instead of answering it."""

    name = "handover"
    records = False
    reads = ("stored.claim", "heard.text", "heard.stored_text", "heard.language")
    writes = ("stored.context", "answer.reply", "answer.reason", "answer.status")

    def __init__(self, users: UserData, handover: HandoverStore, catalog: Catalog, notice: str | None = None) -> None:
        self.catalog = catalog
        self.notice = notice  # HANDOVER_NOTICE: one text for everyone, if the operator set one
        self.users = users
        self.handover = handover

    def __call__(self, turn: Turn) -> None:
        text = turn.heard.text
        if turn.stored.claim is None or text is None:  # Redis down, or nothing readable
            return
        user = turn.msg.user
        try:
            handover, log_left = self.handover.state(user)
            if handover is None:
                if log_left:  # the TTL lapsed before anyone handed back: fold what was said
                    fold(self.users, self.handover, user)
                    turn.stored.context = self.users.store.load(user)
                return
            self.handover.append(user, LogEntry(USER, turn.heard.stored_text or text, time.time()))
            first = self.handover.mark_notified(user)
        except StoreUnavailable as err:
            log.error("store.unavailable", stage="handover", error=str(err))
            return
        log.info("handover.message", notified=first, chars=len(text))
        notice = self.notice or self.catalog.text("handover_notice", turn.heard.language)
        turn.settle(notice if first else "", reason=HANDOVER, status=HANDOVER)
