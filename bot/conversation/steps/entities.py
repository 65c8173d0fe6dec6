"""The entities step: which of the user's known entities this message names (docs/entities.md).

It runs before `memory`, with no model call: an index of the user's entity names, kept per
process while their entities version stands (bot/memory/matching.py), so a message costs
no Redis round trip unless the user's entities changed since.
"""

from __future__ import annotations

import time

import structlog

from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.memory.matching import EntityMatcher
from bot.storage.entities import VERSION_FIELD

log = structlog.get_logger(__name__)


class EntityMatchStep:
    """Match the message against the user's entities, for the memory step to pick by."""

    name = "entities"
    records = False
    reads = ("stored.claim", "heard.text")
    writes = ("found.entity_matches", "found.entities")

    def __init__(self, matcher: EntityMatcher | None) -> None:
        self.matcher = matcher

    def __call__(self, turn: Turn) -> None:
        version = turn.stored.memory.meta.get(VERSION_FIELD, "")
        text = turn.heard.text
        if self.matcher is None or turn.stored.claim is None or text is None or not version:
            return
        started = time.perf_counter()
        try:
            recall = self.matcher.recall(turn.msg.user, text, version)
        except StoreUnavailable as err:  # memory by category alone, this once
            log.warning("store.unavailable", stage="entities", error=str(err))
            return
        turn.found.entity_matches, turn.found.entities = recall.matches, recall.entities
        if recall.matches:
            log.info(
                "entities.matched",
                matches=[f"{m.type}:{m.strategy}:{m.score:.2f}" for m in recall.matches],
                ms=round((time.perf_counter() - started) * 1000, 2),
            )
