"""The memory step: select the user's facts for this message and render the read-only memory
block (docs/memory.md): by meaning when the message has a vector, else by category; when the
task needs no memory, only what keeps the user safe."""

from __future__ import annotations

import structlog

from bot.conversation.task import SAFETY_CATEGORIES
from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.llm.tokens import TokenCounter
from bot.memory.selection import MemorySelection, select_memory
from bot.memory.vectors import FactVectors
from bot.storage.facts import FactStore
from bot.storage.records import Fact, decode_facts

log = structlog.get_logger(__name__)


class MemoryStep:
    """Select the user's facts for this message and render the read-only memory block."""

    name = "memory"
    records = False
    reads = ("stored.claim", "heard.text", "found.task", "found.vector", "found.entity_matches", "found.entities",
             "answer.prompt_tokens_saved")
    writes = ("found.memory_block", "answer.prompt_tokens_saved")

    def __init__(
        self, facts: FactStore | None, counter: TokenCounter, vectors: FactVectors | None = None, *,
        threshold: float, conflict_margin: float, max_tokens: int, related_weight: float,
    ) -> None:
        self.facts = facts
        self.counter = counter
        self.vectors = vectors  # facts by meaning (docs/semantic.md); None: by category
        self.threshold = threshold  # EXTRACTION_CONFIDENCE
        self.conflict_margin = conflict_margin  # CONFLICT_MARGIN
        self.max_tokens = max_tokens  # MEMORY_MAX_TOKENS
        self.related_weight = related_weight  # ENTITY_RELATED_WEIGHT

    def __call__(self, turn: Turn) -> None:
        if self.facts is None or turn.stored.claim is None or turn.heard.text is None:
            return
        memory = turn.stored.memory
        scoped = {"session": decode_facts(memory.session_facts), "user": decode_facts(memory.facts)}
        try:
            scoped["org"] = self.facts.org_facts()
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="org_facts", error=str(err))
        if not any(scoped.values()):
            return
        similarity = self._similarity(turn, {k: f.category for k, f in scoped["user"].items()})
        selection = self._select(scoped, turn, similarity)
        task = turn.found.task
        if task is not None and not task.depends_on_user_memory:
            # the task needs no memory: only what keeps the user safe goes in
            safe = {scope: {k: f for k, f in facts.items() if f.category in SAFETY_CATEGORIES}
                    for scope, facts in scoped.items()}
            full, selection = selection, self._select(safe, turn, similarity)
            turn.answer.prompt_tokens_saved += full.tokens - selection.tokens
        log.debug("memory.selected", facts=len(selection.selected), dropped=len(selection.dropped), tokens=selection.tokens,
                  by_meaning=similarity is not None)
        turn.found.memory_block = selection.block

    def _similarity(self, turn: Turn, categories: dict[str, str]) -> dict[str, float] | None:
        """Return each fact's similarity to the message, or None (no vectors: by category)."""
        stored = turn.stored.memory.vectors
        vector = turn.found.vector
        if self.vectors is None or vector is None or not stored:
            return None
        query = vector.get()
        if query is None:
            return None
        try:
            return self.vectors.similarities(query, stored, categories) or None
        except StoreUnavailable as err:  # the model's center could not be read: by category, this once
            log.warning("store.unavailable", stage="memory_center", error=str(err))
            return None

    def _select(self, scoped: dict[str, dict[str, Fact]], turn: Turn,
                similarity: dict[str, float] | None = None) -> MemorySelection:
        assert turn.heard.text is not None
        return select_memory(
            scoped,
            turn.heard.text,
            self.counter,
            threshold=self.threshold,
            conflict_margin=self.conflict_margin,
            max_tokens=self.max_tokens,
            matches=turn.found.entity_matches,
            entities=turn.found.entities,
            related_weight=self.related_weight,
            similarity=similarity,
        )
