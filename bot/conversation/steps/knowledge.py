"""The knowledge step: the business's documents that answer this message (docs/knowledge.md).

Runs after `embed` and before `memory`. The question is the message, or, when task
extraction is on, the task's restatement of it in the documents' language, else the
resolved task ("and on Sundays?" after a question about opening hours asks about Sunday's
hours): what the embed step embedded. The knowledge base's version arrives with the claim, so a message
costs no Redis round trip while it stands; when it moves on, this process rebuilds its
index first. The picked chunks go into the prompt's REFERENCE (advisory) block and nowhere
else: never into the stored pair, the summary, fact extraction or an export.
"""

from __future__ import annotations

import structlog

from bot.conversation.task import search_text
from bot.conversation.turn import Turn
from bot.exceptions import StoreUnavailable
from bot.knowledge.index import KnowledgeIndex
from bot.knowledge.reference import Reference
from bot.knowledge.retrieval import Retriever
from bot.observability.metrics import KNOWLEDGE_RETRIEVALS
from bot.storage.keys import KB_META_KEY
from bot.storage.scripts import UNREAD

log = structlog.get_logger(__name__)

#: The hash field the claim reads for this step, in its own round trip.
VERSION_FIELD = (KB_META_KEY, "version")


class KnowledgeStep:
    """Find the chunks of the knowledge base that answer the message, for the prompt."""

    name = "knowledge"
    records = False
    reads = ("stored.claim", "stored.read_along", "heard.text", "heard.told", "found.task", "found.vector",
             "found.gate_vector")
    writes = ("found.knowledge_rules", "found.reference_trace", "found.reference")

    def __init__(self, retriever: Retriever | None) -> None:
        self.retriever = retriever

    def __call__(self, turn: Turn) -> None:
        if self.retriever is None or turn.heard.text is None:
            return
        index = self._index(turn)
        if index is None:
            KNOWLEDGE_RETRIEVALS.labels(outcome="unavailable").inc()
            return
        if not len(index):
            KNOWLEDGE_RETRIEVALS.labels(outcome="empty").inc()
            return
        turn.found.knowledge_rules = True
        task, vector, gate = turn.found.task, turn.found.vector, turn.found.gate_vector
        query = search_text(task, turn.heard.text)  # the task's restatement for the documents, when there is one
        # the turn's embeddings (the embed step), read after BM25; without them, words alone
        reference = self.retriever.search(query, index, vector=vector.get if vector else lambda: None,
                                          gate_vector=gate.get if gate else lambda: None,
                                          language=turn.heard.told)  # of translations, the user's
        KNOWLEDGE_RETRIEVALS.labels(outcome="hit" if reference.hit else "miss").inc()
        log.info(
            "knowledge.retrieved",
            version=index.version,
            injected=[f"{p.hit.chunk.id}:{p.hit.score:.2f}" + ("~" if p.cut else "") for p in reference.picked],
            best=[f"{c.hit.chunk.id}:{c.hit.score:.2f}" + ("" if c.hit.margin is None else f"/{c.hit.margin:+.3f}")
                  for c in reference.considered[:3]],
            embedded=reference.embedded,
            gate=reference.gate.decision if reference.gate else None,
            gate_score=None if reference.gate is None or reference.gate.score is None else round(reference.gate.score, 3),
            tokens=reference.tokens,
        )
        turn.found.reference_trace = trace(reference)
        if reference.hit:
            turn.found.reference = reference

    def _index(self, turn: Turn) -> KnowledgeIndex | None:
        """Return the index at the version the claim read; the one held when Redis failed."""
        assert self.retriever is not None
        if turn.stored.claim is None:  # Redis was unreachable: answer from the index this process has
            return self.retriever.current
        version = turn.stored.read_along.get(VERSION_FIELD, UNREAD)
        try:
            return self.retriever.index(None if version is UNREAD else (version or "0"))
        except StoreUnavailable as err:
            log.warning("store.unavailable", stage="knowledge", error=str(err))
            return self.retriever.current


def trace(reference: Reference) -> str:
    """Return what a message got, for inspect: "v12 faq#2:0.93 hours#5:0.81~" (cut: ~), or
    "v12 - (best faq#1:0.21)" when nothing reached the minimum score; with the gate model, its
    decision, its score and each model's margin ("[business 0.312: e +0.110 g +0.202]"). Ids
    and scores only."""
    gate = reference.gate
    said = "" if gate is None or gate.score is None else f" [{gate.decision} {gate.score:.3f}: " + " ".join(
        f"{name} {margin:+.3f}" for name, margin in (("e", gate.ranking_margin), ("g", gate.gate_margin))
        if margin is not None) + "]"
    picked = " ".join(f"{p.hit.chunk.id}:{p.hit.score:.2f}" + ("~" if p.cut else "") for p in reference.picked)
    if picked:
        return f"v{reference.version} {picked}{said}"
    best = reference.considered[0].hit if reference.considered else None
    return f"v{reference.version} -" + (f" (best {best.chunk.id}:{best.score:.2f})" if best else "") + said
