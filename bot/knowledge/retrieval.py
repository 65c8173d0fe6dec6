"""Retrieval on the message path: each process keeps one index of the knowledge base and
rebuilds it when the version moves on (the claim reads the version in its own round trip).

A question costs no Redis round trip and no model call while the version stands: on the
message path its vector is the turn's own (bot/llm/embeddings.py MessageVector, asked for
once and shared with memory), read only after BM25 has run; past EMBEDDING_DEADLINE_S, or
on any failure, BM25 alone serves.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import structlog

from bot.config import Settings
from bot.config.knowledge import KNOWLEDGE_TOP_K
from bot.exceptions import LLMUnavailable, StoreUnavailable
from bot.knowledge.index import KnowledgeIndex
from bot.knowledge.reference import Limits, Reference, build_reference
from bot.llm.embeddings import Embedder
from bot.llm.tokens import TokenCounter
from bot.observability.metrics import KNOWLEDGE_INDEX_BUILD_SECONDS, KNOWLEDGE_INDEX_VERSION
from bot.storage.knowledge import KnowledgeStore

log = structlog.get_logger(__name__)

#: How long a preview's embeddings may take (nobody waits on a preview's reply).
PREVIEW_DEADLINE_S = 5.0
#: Hits considered for a question (the picked ones come first; the rest explain the cut-off).
CONSIDERED = 8


class Retriever:
    """Search the knowledge base for a question, from an index kept per process and version."""

    def __init__(
        self, store: KnowledgeStore, counter: TokenCounter, settings: Settings, embedder: Embedder | None = None,
        gate: Embedder | None = None,
    ) -> None:
        self.store = store
        self.counter = counter
        self.settings = settings
        self.embedder = embedder
        self.gate = gate if embedder is not None else None  # the gate model (bot/knowledge/gate.py)
        self.limits = Limits(settings.KNOWLEDGE_MAX_TOKENS, settings.KNOWLEDGE_MIN_SCORE,
                             settings.KNOWLEDGE_MIN_MARGIN, KNOWLEDGE_TOP_K)
        self._index: KnowledgeIndex | None = None
        self._lock = threading.Lock()

    @property
    def current(self) -> KnowledgeIndex | None:
        """Return the index this process holds now, if any."""
        return self._index

    def index(self, version: str | None = None) -> KnowledgeIndex:
        """Return the index at `version`, rebuilding it when the version moved on (read from
        Redis when not given). One thread rebuilds; the others wait for it."""
        if version is None:
            version = self.store.version()
        index = self._index
        if index is not None and index.version == version:
            return index
        with self._lock:
            index = self._index
            if index is not None and index.version == version:
                return index
            started = time.perf_counter()
            snapshot = self.store.snapshot(vectors=self.embedder is not None)
            index = KnowledgeIndex(snapshot.version, snapshot.chunks, self.settings.KNOWLEDGE_LANGUAGE,
                                   model=self.embedder.model if self.embedder is not None else "",
                                   anchors=snapshot.anchors, gate_model=self.gate.model if self.gate else "")
            self._index = index
            elapsed = time.perf_counter() - started
        KNOWLEDGE_INDEX_BUILD_SECONDS.observe(elapsed)
        KNOWLEDGE_INDEX_VERSION.labels(index="knowledge").set(int(index.version) if index.version.isdigit() else 0)
        log.info("knowledge.index_built", version=index.version, chunks=len(index),
                 vectors=len(index.vector_positions), gate_vectors=len(index.gate_positions),
                 ms=round(elapsed * 1000, 1))
        if self.embedder is not None and index.missing_vectors:
            log.warning("knowledge.vectors_missing", chunks=index.missing_vectors, model=self.embedder.model,
                        detail="these chunks are found by words alone until `kb reembed`")
        return index

    def languages(self) -> list[str]:
        """Return the languages the knowledge base's documents are in (none without documents),
        from the index this process holds (built at its first call): the task step restates a
        question in them (docs/tasks.md)."""
        index = self._index
        if index is None:
            try:
                index = self.index()
            except StoreUnavailable:
                return []
        if not len(index):
            return []
        named = sorted(lang for lang in index.languages if lang)
        return named or ([self.settings.KNOWLEDGE_LANGUAGE] if self.settings.KNOWLEDGE_LANGUAGE else [])

    def question_vector(self, index: KnowledgeIndex, question: str, deadline_s: float,
                        gate: bool = False) -> bytes | None:
        """Return the question's vector (the gate model's with gate), asked for now
        (previews, the eval), or None."""
        embedder = self.gate if gate else self.embedder
        ready = index.has_gate if gate else index.has_vectors
        if embedder is None or not ready or deadline_s <= 0.05:
            return None
        try:
            return embedder.query(question, deadline_s=deadline_s, purpose="knowledge")
        except LLMUnavailable as err:
            log.warning("knowledge.embedding_failed", model=embedder.model, error=str(err)[:200])
            return None

    def search(
        self, question: str, index: KnowledgeIndex, deadline_s: float | None = None,
        vector: Callable[[], bytes | None] | None = None, gate_vector: Callable[[], bytes | None] | None = None,
        language: str | None = None,
    ) -> Reference:
        """Return what would be injected for a question, and why each hit was or was not.
        `vector` and `gate_vector` give the question's vectors (the turn's, read after BM25);
        without them the question is embedded here, within deadline_s."""
        if vector is None:
            budget = self.settings.EMBEDDING_DEADLINE_S if deadline_s is None else deadline_s
            vector = lambda: self.question_vector(index, question, budget)  # noqa: E731 (read after BM25)
            if gate_vector is None:
                gate_vector = lambda: self.question_vector(index, question, budget, gate=True)  # noqa: E731
        found = index.find(question, limit=CONSIDERED, question_vector=vector, gate_vector=gate_vector,
                           language=language)
        embedded = any(h.margin is not None for h in found.hits)
        gate = found.gate if embedded else None
        return build_reference(question, index.version, found.hits, self.counter, self.limits, embedded=embedded,
                               gate=gate)

    def preview(self, question: str) -> Reference:
        """Return what a message would get now (the operator's `kb search` and previews): no
        user waits, so the question's embeddings may take PREVIEW_DEADLINE_S (a fresh CLI
        process connects and loads the client first)."""
        return self.search(question, self.index(), deadline_s=PREVIEW_DEADLINE_S)

