"""The activity step: count the message for the console's overview (bot/storage/activity.py).

It runs after `commit` and before `hand-off`. A message the bot answered counts in its hour;
the model usage of the turn (Turn.usage) counts in its day. Commands, duplicates, rate-limited
messages and the silences of a handover are not answers. Best effort: a Redis error costs
the count, logged, never the reply.
"""

from __future__ import annotations

import time

import structlog

from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.storage.activity import ActivityStore

log = structlog.get_logger(__name__)

#: The turn statuses that count as a message answered.
ANSWERED = ("answered",)


class ActivityStep:
    """Count an answered message and the turn's model usage."""

    name = "activity"
    records = True
    reads = ("stored.claim", "answer.status", "answer.reply", "heard.reply_prefix", "answer.completion",
             "found.task_completion", "heard.transcript", "answer.tool_rounds")
    writes: tuple[str, ...] = ()

    def __init__(self, activity: ActivityStore) -> None:
        self.activity = activity

    def __call__(self, turn: Turn) -> None:
        if turn.stored.claim is None:  # Redis was unreachable: nothing is recorded
            return
        answered = turn.answer.status in ANSWERED and bool(turn.final_reply())
        try:
            self.activity.record(time.time(), answered, turn.usage())
        except StoreUnavailable as err:
            log.warning("activity.not_counted", error=str(err))
