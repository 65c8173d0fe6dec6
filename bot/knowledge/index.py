"""A search index over every chunk of the knowledge base, built once per version.

BM25 (bm25s, Lucene's formula) per language: a document's chunks are tokenized with its
language's Snowball stemmer (PyStemmer) and stopwords (bm25s's lists), and a question is
tokenized once for each language the knowledge base holds and scored against that
language's chunks alone, so a Portuguese question never meets English stems. Accents are
dropped after stemming ("horario" finds "horário"). Without a language nothing is stemmed,
and the stopwords of every language are dropped. A chunk's score is its BM25 score over
the score of a chunk that holds each of the question's words once at the average length
(a word no chunk holds weighing more than the rarest one): about the share of the question
it covers, comparable across questions and languages. Its coverage (the idf-weighted share
of the question's words it holds) is kept beside it, to explain a pick.

With chunk vectors of the current model (EMBEDDING_MODEL), the cosine ranking is fused
with BM25's by reciprocal rank (k = 60). Each hit keeps its margin: its cosine over the
question's mean cosine with passages about nothing the business does
(bot/llm/anchors.py), the dense half of the gate for "nothing relevant"
(docs/semantic.md). With the gate model's vectors too (EMBEDDING_GATE_MODEL), its ranking
joins the fusion (weighted, GATED_WEIGHTS) and both models' best margins say whether the
message is about the business at all (gate.py). Vectors of another model are left out,
never compared.
"""

from __future__ import annotations

import logging
import math
import re
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import Stemmer

from bot.config.embeddings import LOCAL_EMBEDDING_MODEL
from bot.config.knowledge import GATED_RRF_K, GATED_WEIGHTS, LANGUAGES, RRF_K
from bot.knowledge.dense import Dense, dense_ranking, translations
from bot.knowledge.gate import Gate, decide
from bot.storage.knowledge import StoredChunk

if TYPE_CHECKING:
    import bm25s

# bm25s logs its progress on the root handler; its bars are turned off below.
logging.getLogger("bm25s").setLevel(logging.WARNING)

#: Lucene's BM25 constants (Elasticsearch's defaults).
K1, B = 1.2, 0.75
#: How many of each ranking take part in the fusion.
FUSION_DEPTH = 20
#: A question word no chunk holds weighs this much more than the rarest word they hold: the
#: question likely asks for something the documents do not cover ("do you sell bicycles").
#: 1.5 with KNOWLEDGE_MIN_SCORE 0.40 was the best balance on `eval knowledge` (recall@3
#: 94.7 %, false injections 4.2 %; 1.0 with 0.45 gave 96.5 % and 8.3 %).
UNKNOWN_WEIGHT = 1.5
#: How many times a chunk's path line counts (BM25F's field weight, in its simplest form).
HEADING_WEIGHT = 2
_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = {
    "en": "STOPWORDS_EN_PLUS", "pt": "STOPWORDS_PORTUGUESE", "es": "STOPWORDS_SPANISH", "fr": "STOPWORDS_FRENCH",
    "de": "STOPWORDS_GERMAN", "it": "STOPWORDS_ITALIAN", "nl": "STOPWORDS_DUTCH", "da": "STOPWORDS_DANISH",
    "sv": "STOPWORDS_SWEDISH", "no": "STOPWORDS_NORWEGIAN", "ru": "STOPWORDS_RUSSIAN", "tr": "STOPWORDS_TURKISH",
}


def _path_line(text: str) -> str:
    return text.split("\n", 1)[0] if HEADING_WEIGHT > 1 else ""


def unaccented(word: str) -> str:
    """Return the word without its accents ("horário" -> "horario")."""
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


#: Question words bm25s's lists lack: how a question is asked, never what it is about
#: ("quanto custa um croissant?" is about the croissant).
_QUESTION_WORDS = {
    "en": ("much", "many", "could", "please", "pls", "u"),
    "pt": ("quanto", "quanta", "quantos", "quantas", "onde", "quais", "porque", "posso", "pode", "podem", "têm",
           "vocês", "vcs"),
    "es": ("cuánto", "cuánta", "cuántos", "cuántas", "cuándo", "dónde", "cuál", "cuáles", "cómo", "puedo",
           "pueden", "ustedes"),
}


@lru_cache(maxsize=None)
def stopwords(language: str | None) -> frozenset[str]:
    """Return a language's stopwords, with and without accents; without a language, those of
    every language we know (a question's "what", "qual", "cuál" then never weigh as words
    the documents lack: on `eval knowledge` with no language given, false injections fell
    from 16.7 % to 4.2 %)."""
    if language is None:
        return frozenset().union(*(stopwords(code) for code in _STOPWORDS))
    import bm25s.stopwords as bm25s_stopwords  # bm25s loads when an index is first built

    name = _STOPWORDS.get(language or "")
    words = (*getattr(bm25s_stopwords, name, ()), *_QUESTION_WORDS.get(language or "", ())) if name else ()
    return frozenset(w for word in words for w in (word.lower(), unaccented(word.lower())))


class Tokenizer:
    """Words of a text as indexed in one language: lower case, no stopwords, stemmed, unaccented."""

    def __init__(self, language: str | None) -> None:
        self.language = language
        self.stop = stopwords(language)
        algorithm = LANGUAGES.get(language or "")
        self._stem: Callable[[str], str] = Stemmer.Stemmer(algorithm).stemWord if algorithm else (lambda w: w)
        self._cache: dict[str, str] = {}

    def __call__(self, text: str) -> list[str]:
        out = []
        for word in _WORD.findall(text.lower()):
            if word in self.stop or unaccented(word) in self.stop or word == "_":
                continue
            token = self._cache.get(word)
            if token is None:
                token = unaccented(self._stem(word))
                if len(self._cache) < 200_000:
                    self._cache[word] = token
            out.append(token)
        return out


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Return the matrix with each row scaled to length 1 (a row of zeros stays zeros)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


@dataclass(frozen=True)
class Hit:
    """A chunk found for a question, and why."""

    chunk: StoredChunk
    coverage: float  # the idf-weighted share of the question's words the chunk holds (0..1)
    score: float  # BM25 over the question's ideal score: the lexical ranking (0: only the vector found it)
    bm25_rank: int | None  # 1 = best among all chunks; None: no word in common
    similarity: float | None = None  # cosine with the question's vector (with embeddings)
    vector_rank: int | None = None
    margin: float | None = None  # the cosine over the question's mean cosine with the anchors
    fused: float = 0.0  # reciprocal rank fusion's score (the order of the hits)
    gate_similarity: float | None = None  # the gate model's cosine (with its vectors)
    gate_rank: int | None = None
    gate_margin: float | None = None
    translation_of: str | None = None  # a hit that says the same in another language, given instead


@dataclass(frozen=True)
class Found:
    """The hits for a question, best first, and the gate's decision on it."""

    hits: list[Hit]
    gate: Gate


@dataclass
class _Language:
    """The chunks of one language, and their BM25 index."""

    tokenizer: Tokenizer
    positions: list[int]  # into KnowledgeIndex.chunks
    bm25: bm25s.BM25 | None
    idf: dict[str, float] = field(default_factory=dict)
    unknown_idf: float = 0.0  # the weight of a word no chunk holds
    position_array: np.ndarray = field(init=False)  # positions, for numpy's indexing

    def __post_init__(self) -> None:
        self.position_array = np.array(self.positions, dtype=np.int64)


class KnowledgeIndex:
    """Every chunk of one knowledge-base version, searchable by words and (optionally) vector."""

    def __init__(
        self, version: str, chunks: Sequence[StoredChunk], default_language: str | None = None, model: str = "",
        anchors: Sequence[tuple[bytes, str]] = (), gate_model: str = "",
    ) -> None:
        started = time.perf_counter()
        self.version = version
        self.model = model  # the embedding model whose vectors are searched ("" for none)
        self.gate_model = gate_model  # the gate model's ("" for none)
        self.chunks = list(chunks)
        self.default_language = default_language
        groups: dict[str | None, list[int]] = {}
        for position, chunk in enumerate(self.chunks):
            for language in self._languages_of(chunk):  # a document in several languages is in each
                groups.setdefault(language, []).append(position)
        self.languages = {lang: self._build(lang, positions) for lang, positions in groups.items()}

        self.vectors, self.vector_positions = self._vectors(model)
        self.anchors = self._anchors(anchors, model, self.vectors)
        self.gate_vectors, self.gate_positions = self._vectors(gate_model) if model else (None, np.zeros(0, np.int64))
        self.gate_anchors = self._anchors(anchors, gate_model, self.gate_vectors)
        self._gate_row = {int(p): row for row, p in enumerate(self.gate_positions.tolist())}
        self.build_s = time.perf_counter() - started

    def _languages_of(self, chunk: StoredChunk) -> list[str | None]:
        """Return the languages a chunk is indexed in: its document's, else the default."""
        codes = [c for c in (chunk.language or self.default_language or "").split(",") if c in LANGUAGES]
        return list(codes) or [None]

    def _build(self, language: str | None, positions: list[int]) -> _Language:
        import bm25s  # here, not at import: a CLI command that searches nothing never loads it

        tokenizer = Tokenizer(language)
        # The path line ("Doc › Heading") counts twice: a heading says what its text is about.
        corpus = [tokenizer(f"{_path_line(self.chunks[p].text)}\n{self.chunks[p].text}") or [""] for p in positions]
        bm25 = bm25s.BM25(k1=K1, b=B, method="lucene")
        bm25.index(corpus, show_progress=False)
        df = Counter(token for tokens in corpus for token in set(tokens))
        n = len(corpus)
        idf = {token: math.log(1 + (n - count + 0.5) / (count + 0.5)) for token, count in df.items()}
        # A word no chunk holds weighs as much as the rarest word they hold: the question
        # asks for something the documents may not cover.
        return _Language(tokenizer, positions, bm25, idf, max(idf.values(), default=0.0))

    def _vectors(self, model: str) -> tuple[np.ndarray | None, np.ndarray]:
        """Return the normalized vectors of the chunks embedded by a model (one row each), and
        the chunk position of each row; (None, []) when there are none."""
        rows, positions = [], []
        for position, chunk in enumerate(self.chunks):
            vector = chunk.vectors.get(model) if model else None
            if vector is None:
                continue
            rows.append(np.frombuffer(vector, dtype=np.float32))
            positions.append(position)
        width = Counter(row.shape[0] for row in rows).most_common(1)
        if not width:
            return None, np.zeros(0, dtype=np.int64)
        keep = [i for i, row in enumerate(rows) if row.shape[0] == width[0][0]]
        return unit_rows(np.vstack([rows[i] for i in keep])), np.array([positions[i] for i in keep], dtype=np.int64)

    @staticmethod
    def _anchors(anchors: Sequence[tuple[bytes, str]], model: str, vectors: np.ndarray | None) -> np.ndarray | None:
        """Return the baseline passages' normalized vectors of a model, or None."""
        if vectors is None:
            return None
        rows = [np.frombuffer(v, dtype=np.float32) for v, m in anchors if m == model]
        rows = [row for row in rows if row.shape[0] == vectors.shape[1]]
        return unit_rows(np.vstack(rows)) if rows else None

    @property
    def has_gate(self) -> bool:
        """True when the gate model's vectors and anchors are here (documents embedded by it)."""
        return self.gate_vectors is not None and self.gate_anchors is not None

    @property
    def has_vectors(self) -> bool:
        """True when chunks of the current model's vectors are searchable by meaning."""
        return self.vectors is not None

    @property
    def missing_vectors(self) -> int:
        """Return how many chunks have no vector of the current model (`kb reembed` fills them)."""
        return len(self.chunks) - len(self.vector_positions)

    def __len__(self) -> int:
        return len(self.chunks)

    def lexical(self, question: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return the chunks that share a word with the question, each once (in its best
        language): their positions, coverage (the idf-weighted share of the question's words
        each holds, 0..1) and BM25 score over the question's ideal score (the ranking)."""
        found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for lang in self.languages.values():
            tokens = list(dict.fromkeys(lang.tokenizer(question)))  # each word once
            known = [t for t in tokens if t in lang.idf]
            if not known or lang.bm25 is None:
                continue
            weights = [lang.idf.get(t, lang.unknown_idf * UNKNOWN_WEIGHT) for t in tokens]
            total = sum(weights)
            if total <= 0:
                continue
            raw = np.zeros(len(lang.positions), dtype=np.float64)
            covered = np.zeros(len(lang.positions), dtype=np.float64)
            for token, weight in zip(tokens, weights):
                if token not in lang.idf:
                    continue
                scores = lang.bm25.get_scores([token])
                raw += scores
                covered += (scores > 0) * weight
            local = np.flatnonzero(raw > 0)
            found.append((lang.position_array[local], covered[local] / total, raw[local] / (total / (1 + K1))))
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
        positions, coverage, score = (np.concatenate(parts) for parts in zip(*found))
        if len(found) > 1:  # a chunk in several languages counts once, with its best score
            best = np.lexsort((-score, positions))
            first = np.ones(len(best), dtype=bool)
            first[1:] = positions[best][1:] != positions[best][:-1]
            keep = best[first]
            positions, coverage, score = positions[keep], coverage[keep], score[keep]
        return positions, coverage, score

    def search(
        self, question: str, limit: int = 10, question_vector: bytes | Callable[[], bytes | None] | None = None,
        gate_vector: bytes | Callable[[], bytes | None] | None = None,
    ) -> list[Hit]:
        """Return the best chunks for a question, best first (find's hits)."""
        return self.find(question, limit, question_vector, gate_vector).hits

    def find(
        self, question: str, limit: int = 10, question_vector: bytes | Callable[[], bytes | None] | None = None,
        gate_vector: bytes | Callable[[], bytes | None] | None = None, language: str | None = None,
    ) -> Found:
        """Return the best chunks for a question, best first, and the gate's decision: BM25
        alone, or fused by reciprocal rank with the vector rankings when the question's
        vectors are given (or callables that return them, read after BM25 has run: the
        embeddings work meanwhile)."""
        positions, coverage, score = self.lexical(question)
        if callable(question_vector):
            question_vector = question_vector() if self.vectors is not None else None
        if callable(gate_vector):
            gate_vector = gate_vector() if self.has_gate and question_vector is not None else None
        ranked = positions[np.lexsort((positions, -score))]  # best first; a tie by position
        bm25_rank = {int(p): rank for rank, p in enumerate(ranked[:FUSION_DEPTH].tolist(), start=1)}
        lexical_at = np.full(len(self.chunks), -1, dtype=np.int64)  # chunk position -> its row above
        lexical_at[positions] = np.arange(len(positions))
        empty = Dense({}, {}, {}, 0.0)
        dense = dense_ranking(self.vectors, self.vector_positions, self.anchors, question_vector, FUSION_DEPTH)
        gated = dense_ranking(self.gate_vectors, self.gate_positions, self.gate_anchors,
                              gate_vector if self.has_gate else None, FUSION_DEPTH) if dense is not None else None
        vector, gate = dense or empty, gated or empty
        found_by_vectors = vector.rank.keys() | gate.rank.keys()
        # a chunk the vectors found below BM25's first FUSION_DEPTH still has its BM25 rank
        if found_by_vectors - bm25_rank.keys() and len(ranked) > FUSION_DEPTH:
            rank_of = np.zeros(len(self.chunks), dtype=np.int64)
            rank_of[ranked] = np.arange(1, len(ranked) + 1)
            bm25_rank.update({p: int(rank_of[p]) for p in found_by_vectors if p not in bm25_rank and rank_of[p]})
        candidates = set(ranked[:FUSION_DEPTH].tolist()) | found_by_vectors
        if gated is not None:  # three rankings, weighted (docs/semantic.md)
            k, rankings = GATED_RRF_K, ((GATED_WEIGHTS["bm25"], bm25_rank), (GATED_WEIGHTS["vector"], vector.rank),
                                        (GATED_WEIGHTS["gate"], gate.rank))
        else:
            k, rankings = RRF_K, ((1.0, bm25_rank), (1.0, vector.rank))

        def fused(p: int) -> float:
            return sum(weight / (k + r[p]) for weight, r in rankings if p in r)

        def words(p: int) -> tuple[float, float]:
            at = lexical_at[p]
            return (0.0, 0.0) if at < 0 else (float(coverage[at]), float(score[at]))

        found = sorted(candidates, key=lambda p: (-fused(p), -words(p)[1], self.chunks[p].id))[:limit]
        hits = [
            Hit(self.chunks[p], *words(p), bm25_rank.get(p), vector.similarity.get(p), vector.rank.get(p),
                vector.margin.get(p), fused(p), gate.similarity.get(p), gate.rank.get(p), gate.margin.get(p))
            for p in found
        ]
        if gated is not None and self.gate_vectors is not None:  # a page in three languages counts once
            rows = [self._gate_row.get(p) for p in found]
            hits = translations(hits, [None if r is None else self.gate_vectors[r] for r in rows], language)
        best_words = float(score.max()) if len(score) else None
        decision = decide(dense.best_margin if dense else None, gated.best_margin if gated else None, best_words,
                          paired=self.model == LOCAL_EMBEDDING_MODEL)
        return Found(hits, decision)
