"""Facts by meaning: each fact's embedding in 1 bit per dimension (docs/semantic.md).

A fact is embedded when it is written (by the extraction job, an operator's edit, the
console), as "key words: value", and kept as the signs of its vector minus the model's
center: 384 bits, 64 characters of base64, so a user's 50 facts add about 3.3 KB and the
vectors hash keeps Redis's compact encoding. The center is the mean of bot/llm/anchors.py's
passages, computed once per model by the first writer and stored (bot/storage/centers.py):
without it most bits would be alike, as every e5 vector leans the same way.

A message's vector (float) is scored against those signs (the asymmetric estimate of the
cosine of the centered vectors): no model call, no Redis round trip on the message path
(the claim reads the vectors with the facts). Vectors of another model are never compared.
"""

from __future__ import annotations

import base64
import threading
from typing import Iterable

import numpy as np
import structlog

from bot.llm.anchors import anchor_vectors
from bot.llm.embeddings import Embedder
from bot.storage.centers import CenterStore
from bot.storage.facts import MODEL_FIELD
from bot.storage.records import Fact

log = structlog.get_logger(__name__)

#: All a batch of facts' embeddings may take (a job or an operator's request, never a message).
ENCODE_DEADLINE_S = 30.0


def fact_text(fact: Fact) -> str:
    """Return what is embedded for a fact: its key's words, then its value."""
    return f"{fact.key.replace('_', ' ')}: {fact.value}"


def pack_signs(vector: np.ndarray, center: np.ndarray) -> str:
    """Return the signs of vector - center, 1 bit each, as base64."""
    return base64.b64encode(np.packbits((vector - center) > 0).tobytes()).decode("ascii")


def unpack_signs(packed: str, dims: int) -> np.ndarray | None:
    """Return stored signs as +1/-1, or None when they do not fit the model's width."""
    try:
        raw = np.frombuffer(base64.b64decode(packed, validate=True), dtype=np.uint8)
    except ValueError:
        return None
    bits = np.unpackbits(raw)
    if bits.shape[0] < dims or bits.shape[0] - dims >= 8:
        return None
    return bits[:dims].astype(np.float32) * 2 - 1


class FactVectors:
    """Embed facts as they are written, and score them against a message's vector."""

    def __init__(self, embedder: Embedder, centers: CenterStore) -> None:
        self.embedder = embedder
        self.centers = centers
        self._center: tuple[str, np.ndarray] | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """Return the model the vectors come from."""
        return self.embedder.model

    def center(self, compute: bool = False) -> np.ndarray | None:
        """Return the model's center: this process's copy, else the stored one, else (when
        compute, off the message path) the anchors' mean, stored for every process."""
        held = self._center
        if held is not None and held[0] == self.model:
            return held[1]
        with self._lock:
            stored = self.centers.get(self.model)
            if stored is None and compute:
                vectors = anchor_vectors(self.embedder, ENCODE_DEADLINE_S)
                mean = np.mean([np.frombuffer(v, dtype=np.float32) for v in vectors], axis=0).astype(np.float32)
                stored = self.centers.put(self.model, mean.tobytes())
                log.info("memory.center_stored", model=self.model)
            if stored is None:
                return None
            center = np.frombuffer(stored, dtype=np.float32)
            self._center = (self.model, center)
            return center

    def encode(self, facts: Iterable[Fact]) -> dict[str, str]:
        """Return each fact's stored vector, by key; raise LLMUnavailable (or StoreUnavailable)."""
        facts = list(facts)
        if not facts:
            return {}
        center = self.center(compute=True)
        assert center is not None
        vectors = self.embedder.embed([fact_text(f) for f in facts], deadline_s=ENCODE_DEADLINE_S,
                                      purpose="memory_index")
        return {f.key: pack_signs(np.frombuffer(v, dtype=np.float32), center) for f, v in zip(facts, vectors)}

    def similarities(self, query: bytes, stored: dict[str, str]) -> dict[str, float]:
        """Return, by fact key, how close each stored fact is to the message (about the
        cosine of the centered vectors); {} when they are another model's or the center is
        unknown."""
        if not stored or stored.get(MODEL_FIELD) != self.model:
            return {}
        center = self.center()
        if center is None:
            return {}
        q = np.frombuffer(query, dtype=np.float32) - center
        norm = float(np.linalg.norm(q))
        if norm == 0 or q.shape[0] != center.shape[0]:
            return {}
        q = q / norm
        scale = 1 / np.sqrt(q.shape[0])
        out = {}
        for key, packed in stored.items():
            if key == MODEL_FIELD:
                continue
            signs = unpack_signs(packed, q.shape[0])
            if signs is not None:
                out[key] = float(signs @ q) * scale
        return out
