"""The stand-in model's knowledge-base parts: /v1/embeddings, and replies from a REFERENCE block.

Embeddings are hashed bags of word stems (256 dimensions, L2-normalized): deterministic,
offline, and close for texts that share words, which is all a stand-in needs to exercise
the fusion of rankings. A reply prompt that carries a REFERENCE (advisory) block is
answered by quoting its first passage, so `make run` shows which chunk an answer came from.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
import unicodedata
from typing import Any

from bot.dev.standin_given import fenced_data
from bot.llm.fence import REFERENCE_HEADER

DIMENSIONS = 256
_WORD = re.compile(r"\w+", re.UNICODE)


def _stems(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(c for c in folded if not unicodedata.combining(c))
    return [w[:5] for w in _WORD.findall(plain) if len(w) > 2]


def embed(text: str) -> list[float]:
    """Return the stand-in's vector for a text."""
    vector = [0.0] * DIMENSIONS
    for stem in _stems(text):
        digest = hashlib.blake2b(stem.encode(), digest_size=4).digest()
        vector[int.from_bytes(digest[:2], "big") % DIMENSIONS] += 1.0 if digest[2] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [round(v / norm, 6) for v in vector]


def embeddings(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Answer POST /v1/embeddings as OpenAI does (a string or a list of strings)."""
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        return 400, {"error": {"message": "input must be a string or a list of strings", "type": "invalid_request_error"}}
    data = [{"object": "embedding", "index": i, "embedding": embed(t)} for i, t in enumerate(texts)]
    tokens = sum(len(t.split()) for t in texts)
    return 200, {"object": "list", "data": data, "model": body.get("model") or "standin-embedding",
                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


def reference_reply(messages: list[dict[str, Any]], notice: str, context: str = "") -> str | None:
    """Return a reply quoting the first passage of the prompt's REFERENCE block, if any, and
    `context` (what else the model was given)."""
    passages = fenced_data(messages, REFERENCE_HEADER)
    if passages:
        source, _, body = passages[0].partition("\n")
        first = " ".join(body.split())[:220]
        return f"{notice} From the reference ({source}): {first}" + (f" {context}" if context else "")
    return None


class EmbeddingRequests:
    """The stand-in's embeddings API, and what it was asked for: (model, text), oldest first
    (a test reads what a turn embedded)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: list[tuple[str, str]] = []

    def answer(self, body: dict[str, Any], record: bool = True) -> tuple[int, dict[str, Any]]:
        """Answer one request, and record its texts."""
        status, answer = embeddings(body)
        if status == 200 and record:
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            with self._lock:
                self._texts += [(str(body.get("model")), t) for t in texts]
        return status, answer

    def texts(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._texts)

    def clear(self) -> None:
        with self._lock:
            self._texts.clear()
