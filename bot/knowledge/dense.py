"""The knowledge base searched by meaning (docs/semantic.md): one model's ranking of the
chunks for a question's vector, with each chunk's margin over the anchors, and the passages
that say the same thing in different languages, counted once."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, Sequence, TypeVar

import numpy as np

from bot.storage.knowledge import StoredChunk


class _Found(Protocol):
    """A hit, as translations() reads it (bot/knowledge/index.py Hit)."""

    chunk: StoredChunk
    translation_of: str | None


H = TypeVar("H", bound=_Found)

#: The gate model's cosine from which two passages in different languages say the same
#: thing: it scores a passage and its translation 0.84-0.90, two sections of one page at
#: most 0.62 (the bakery's pages).
TRANSLATION_COS = 0.8


@dataclass(frozen=True)
class Dense:
    """One model's ranking of the chunks for a question: rank, cosine, margin by position."""

    rank: dict[int, int]
    similarity: dict[int, float]
    margin: dict[int, float]
    best_margin: float


def dense_ranking(vectors: np.ndarray | None, positions: np.ndarray, anchors: np.ndarray | None,
                  vector: bytes | None, depth: int = 20) -> Dense | None:
    """Return one model's first `depth` chunks for a question's vector (None without one, or
    without its vectors): their ranks, cosines and margins (the cosine over the question's
    mean cosine with passages about nothing the business does, bot/llm/anchors.py; with
    none stored, with every chunk), and the best margin."""
    if vector is None or vectors is None:
        return None
    query = np.frombuffer(vector, dtype=np.float32)
    if query.shape[0] != vectors.shape[1] or np.linalg.norm(query) == 0:
        return None
    query = query / np.linalg.norm(query)
    sims = vectors @ query
    baseline = float((anchors @ query).mean() if anchors is not None else sims.mean())
    depth = min(depth, len(sims))
    top = np.argpartition(-sims, depth - 1)[:depth]
    order = top[np.argsort(-sims[top], kind="stable")]
    dense = Dense({}, {}, {}, float(sims[order[0]]) - baseline)
    for rank, row in enumerate(order, start=1):
        position = int(positions[row])
        dense.rank[position] = rank
        dense.similarity[position] = float(sims[row])
        dense.margin[position] = float(sims[row]) - baseline
    return dense


def translations(hits: list[H], vectors: Sequence[np.ndarray | None], language: str | None) -> list[H]:
    """Group the hits (best first, each with its gate-model vector, normalized) that say the
    same thing, in different languages (a page the business publishes in three) or twice in
    one; keep one of each group, the one in the message's language when there is one, at the group's best
    place, and mark the others `translation_of` it, so the reference has room for other
    passages."""
    groups: list[list[int]] = []
    for i, vector in enumerate(vectors):
        if vector is None:
            continue
        for group in groups:
            if any(float(vectors[j] @ vector) >= TRANSLATION_COS for j in group):  # type: ignore[operator]
                group.append(i)
                break
        else:
            groups.append([i])
    out = list(hits)
    for group in (g for g in groups if len(g) > 1):
        keep = next((j for j in group if language and language in (hits[j].chunk.language or "").split(",")),
                    group[0])
        out[group[0]], out[keep] = hits[keep], hits[group[0]]  # the kept one takes the group's best place
        for j in group:
            if out[j].chunk.id != hits[keep].chunk.id:
                out[j] = replace(out[j], translation_of=hits[keep].chunk.id)  # type: ignore[type-var]
    return out
