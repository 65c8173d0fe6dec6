"""The embed step: the message's meaning, asked for once per turn (docs/semantic.md).

Runs after `task` and before `knowledge` and `memory`, which share what it starts. The text
embedded is, when task extraction is on, the task's restatement of the question in the
documents' language ("¿atienden niños?" as "atendem crianças?" for a Portuguese knowledge
base), else the resolved task ("and on Sundays?" after a question about hours asks about
Sunday's hours); without it, the message; of a long one (a voice
note's transcript) the sentences that ask something, from the start, within
EMBEDDING_MAX_CHARS, by both models at once: the ranking model (EMBEDDING_MODEL) and the
gate model (EMBEDDING_GATE_MODEL). A message with no letter or digit
(an emoji, a sticker's placeholder) costs no embedding. The call starts here and runs while
the next steps do their lexical work; each reader waits at most until EMBEDDING_DEADLINE_S,
then falls back to words. After three failures in a row the step stops asking for 30 s
(bot/llm/embeddings.py Breaker), so a hung model does not cost every message the deadline.
"""

from __future__ import annotations

from bot.config.media import MIN_MODEL_AFTER_MEDIA_S
from bot.conversation.task import search_text
from bot.conversation.turn import Turn
from bot.llm.embeddings import Embedder, MessageVector, has_words
from bot.observability.metrics import MESSAGE_EMBEDDINGS


class EmbedStep:
    """Start the message's embedding for the steps that search by meaning."""

    name = "embed"
    records = False
    reads = ("heard.text", "found.task")
    writes = ("found.vector", "found.gate_vector")

    def __init__(self, embedder: Embedder | None, deadline_s: float, gate: Embedder | None = None) -> None:
        self.embedder = embedder
        self.gate = gate  # the gate model (EMBEDDING_GATE_MODEL), asked at the same time
        self.deadline_s = deadline_s  # EMBEDDING_DEADLINE_S

    def __call__(self, turn: Turn) -> None:
        if self.embedder is None or turn.heard.text is None:
            return
        task = turn.found.task
        text = search_text(task, turn.heard.text)
        if not has_words(text):
            MESSAGE_EMBEDDINGS.labels(outcome="skipped").inc()
            return
        budget = min(self.deadline_s, turn.remaining() - MIN_MODEL_AFTER_MEDIA_S)
        if budget <= 0.05:
            MESSAGE_EMBEDDINGS.labels(outcome="timeout").inc()
            return
        if not self.embedder.breaker.allow():  # the model kept failing: words, without waiting
            MESSAGE_EMBEDDINGS.labels(outcome="paused").inc()
            return
        turn.found.vector = MessageVector(self.embedder, text, budget)
        if self.gate is not None and self.gate.breaker.allow():
            turn.found.gate_vector = MessageVector(self.gate, text, budget, counted=False)
