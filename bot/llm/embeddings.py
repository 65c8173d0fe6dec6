"""Embeddings through the openai SDK's /v1/embeddings, errors turned into ours.

Chunks are embedded when a document is added (in batches, with the SDK's own retries);
a message's question is embedded once per turn with a short hard deadline and no retry.
Vectors travel as float32 bytes, the form the knowledge base stores and the index reads.
"""

from __future__ import annotations

import time
from array import array
from typing import Sequence

import openai
import structlog

from bot.exceptions import LLMUnavailable
from bot.llm.deadline import DeadlineExceeded, run_with_deadline
from bot.observability.metrics import MODEL_TOKENS

log = structlog.get_logger(__name__)

#: Texts per request when a document is embedded (OpenAI takes up to 2,048 inputs).
BATCH = 128


def as_float32(values: Sequence[float]) -> bytes:
    """Return a vector as float32 bytes."""
    return array("f", values).tobytes()


class Embedder:
    """Embed texts with one model; every failure becomes LLMUnavailable."""

    def __init__(self, client: openai.OpenAI, model: str) -> None:
        self.client = client
        self.model = model

    def embed(self, texts: Sequence[str], *, deadline_s: float, purpose: str) -> list[bytes]:
        """Return one float32 vector per text, all within deadline_s."""
        vectors: list[bytes] = []
        started = time.perf_counter()
        deadline = time.monotonic() + deadline_s
        for start in range(0, len(texts), BATCH):
            batch = list(texts[start:start + BATCH])
            budget = deadline - time.monotonic()
            if budget <= 0.05:
                raise LLMUnavailable("no time left for the embeddings")
            client = self.client.with_options(timeout=budget)
            try:
                response = run_with_deadline(lambda: client.embeddings.create(model=self.model, input=batch), budget)
            except DeadlineExceeded:
                self._failed(purpose, "timeout", started)
                raise LLMUnavailable("embeddings: timeout") from None
            except openai.OpenAIError as err:
                self._failed(purpose, type(err).__name__, started)
                raise LLMUnavailable(f"embeddings: {type(err).__name__}: {err}") from err
            data = sorted(response.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise LLMUnavailable(f"embeddings: {len(data)} vectors for {len(batch)} texts")
            vectors += [as_float32(item.embedding) for item in data]
            usage = getattr(response, "usage", None)
            if usage is not None:
                MODEL_TOKENS.labels(purpose=purpose, model=self.model, kind="prompt").inc(usage.prompt_tokens or 0)
        return vectors

    def _failed(self, purpose: str, error: str, started: float) -> None:
        log.warning("embeddings.failed", purpose=purpose, model=self.model, error=error,
                    duration_ms=round((time.perf_counter() - started) * 1000, 1))
