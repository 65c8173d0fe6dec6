"""One message's meaning, timed: its embeddings by both local models (e5 ranks, USE v3
gates; over loopback, as the Procfile's `embed` process serves them) and the knowledge-base
search they feed (BM25 and both dense rankings fused, the gate's decision), at 10,000
chunks, and the scores of a user's 50 facts (unpacked as the claim reads them); then what
one message costs the `embed` process in CPU milliseconds, for each model. Prints figures;
asserts nothing.

The bench process and the model's server are pinned to one core each (the model with
EMBEDDING_THREADS=1), so the figures are what one core per side gives. Chunks are the eval
set's 118 real chunks repeated with a number in each (BM25 sees 10,000 distinct chunks);
their vectors are the real ones with a little noise, so the dense search does the same
work as with 10,000 embedded chunks without embedding them all (about 3.5 minutes per
1,000 chunks on one core, the figure printed first, measured on the real chunks).

    .venv/bin/python bench/bench_semantic.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bot  # noqa: E402,F401 - first: one BLAS thread, as the bot runs (bot/__init__.py)
import numpy as np  # noqa: E402

from bot.config import load_settings  # noqa: E402
from bot.dev.embedding_server import start_embedding_server  # noqa: E402
from bot.dev.knowledge_evaluation import DATA_DIR, load_set  # noqa: E402
from bot.llm.anchors import anchor_vectors  # noqa: E402
from bot.knowledge.chunking import chunk_document  # noqa: E402
from bot.knowledge.extract import extract, kind_of  # noqa: E402
from bot.knowledge.index import KnowledgeIndex  # noqa: E402
from bot.llm.embeddings import MessageVector, make_embedder, make_gate_embedder  # noqa: E402
from bot.llm.tokens import TokenCounter  # noqa: E402
from bot.storage import packed_facts  # noqa: E402
from bot.storage.facts import MODEL_FIELD  # noqa: E402
from bot.storage.knowledge import StoredChunk  # noqa: E402

CHUNKS = 10_000
MESSAGES = 200


def pct(values: list[float], q: float) -> float:
    """Return the q-th percentile (0..100) of values."""
    return float(np.percentile(values, q))


def main() -> int:
    """Print the index time per 1,000 chunks, then per-message p50/p99 at 10,000 chunks."""
    server = start_embedding_server(threads=1)
    try:
        os.sched_setaffinity(server.process.pid, {0})
        os.sched_setaffinity(0, {1 % os.cpu_count()})  # type: ignore[operator]
        settings = load_settings(env_files=False, need=(), EMBEDDING_BASE_URL=server.url)
        embedder, gate = make_embedder(settings), make_gate_embedder(settings)
        assert embedder is not None and gate is not None
        counter = TokenCounter(settings.OPENAI_MODEL)
        manifest, questions = load_set()
        texts: list[tuple[str, str | None]] = []
        for doc in manifest:
            data = (DATA_DIR / doc["file"]).read_bytes()
            extracted = extract(data, kind_of(doc["file"]) or "markdown")
            texts += [(c.text, doc.get("language")) for c in chunk_document(doc.get("title") or "", extracted.text, counter)]
        started = time.perf_counter()
        real = embedder.embed([t for t, _ in texts], deadline_s=600, purpose="bench")
        index_s = time.perf_counter() - started
        started = time.perf_counter()
        real_gate = gate.embed([t for t, _ in texts], deadline_s=600, purpose="bench")
        gate_s = time.perf_counter() - started
        print(f"indexing: {len(texts)} chunks embedded in {index_s:.1f} s (e5) + {gate_s:.1f} s (USE) on one core "
              f"= {(index_s + gate_s) / len(texts) * 1000:.0f} s per 1,000 chunks")
        anchors = [(v, embedder.model) for v in anchor_vectors(embedder)] + [
            (v, gate.model) for v in anchor_vectors(gate)]
        rng = np.random.default_rng(7)
        chunks = []
        for i in range(CHUNKS):
            body, language = texts[i % len(texts)]
            vector = np.frombuffer(real[i % len(real)], dtype=np.float32) + rng.normal(0, 0.01, 384).astype(np.float32)
            gated = np.frombuffer(real_gate[i % len(real)], dtype=np.float32) + rng.normal(0, 0.01, 512).astype(
                np.float32)
            every = {embedder.model: vector.astype(np.float32).tobytes(), gate.model: gated.astype(np.float32).tobytes()}
            chunks.append(StoredChunk(f"d{i // 50}#{i % 50 + 1}", f"d{i // 50}", "Doc", language,
                                      f"{body} (item {i})", 160, every))
        built = time.perf_counter()
        index = KnowledgeIndex("1", chunks, model=embedder.model, anchors=anchors, gate_model=gate.model)
        assert index.has_gate
        print(f"index build at {CHUNKS:,} chunks: {time.perf_counter() - built:.1f} s")
        fact_vectors, packed, categories, redis_server = user_with_fifty_facts(embedder)
        asked = [q.question for q in questions]
        embed_ms, total_ms = [], []
        for n in range(MESSAGES):
            question = asked[n % len(asked)] + ("" if n < len(asked) else f" {n}")  # no cache anywhere
            start = time.perf_counter()
            vector = MessageVector(embedder, question, 0.8)
            gate_vector = MessageVector(gate, question, 0.8, counted=False)
            found = index.find(question, limit=8, question_vector=vector.get, gate_vector=gate_vector.get)
            hits = found.hits
            got = vector.get()
            assert got is not None and found.gate.gate_margin is not None
            _, stored = packed_facts.unpack(packed)
            scores = fact_vectors.similarities(got, stored, categories)
            end = time.perf_counter()
            assert hits and len(scores) == 50
            total_ms.append((end - start) * 1000)
            # the ranking model's embedding alone, for comparison (the question again, timed on its own)
            t = time.perf_counter()
            embedder.query(f"{question} (alone)", deadline_s=0.8, purpose="bench")  # not from the cache
            embed_ms.append((time.perf_counter() - t) * 1000)
        print(f"{MESSAGES} messages at {CHUNKS:,} chunks, one core each side:")
        print(f"  e5's embedding alone (openai SDK over loopback): p50 {statistics.median(embed_ms):.1f} ms, "
              f"p99 {pct(embed_ms, 99):.1f} ms")
        print(f"  both embeddings + BM25 + both dense rankings + the gate + 50 facts, overlapped as on the message "
              f"path: p50 {statistics.median(total_ms):.1f} ms, p99 {pct(total_ms, 99):.1f} ms")
        cpu_per_message(server, embedder, gate, asked)
        redis_server.stop()
    finally:
        server.stop()
    return 0


def cpu_per_message(server, embedder, gate, asked: list[str]) -> None:  # type: ignore[no-untyped-def]
    """Print what one message's embedding costs the `embed` process in CPU time, per model
    (new texts each time: the cache never answers)."""
    import psutil

    process = psutil.Process(server.process.pid)
    for name, model in (("e5 (ranking)", embedder), ("USE v3 (gate)", gate)):
        before = sum(process.cpu_times()[:2])
        for n in range(MESSAGES):
            model.query(f"{asked[n % len(asked)]} ({name} {n})", deadline_s=5, purpose="bench")
        spent = sum(process.cpu_times()[:2]) - before
        print(f"  one message's embedding costs the embed process {spent / MESSAGES * 1000:.1f} CPU ms with {name}")


def user_with_fifty_facts(embedder):  # type: ignore[no-untyped-def]
    """Return the fact scorer, a user's 50 facts (eval memory's m02) packed with their vectors
    as Redis holds them, their categories, and the private Redis holding the model's center."""
    import tempfile

    from bot.dev.embedded import start_embedded_redis
    from bot.dev.memory_evaluation import load_users, user_facts
    from bot.memory.vectors import FactVectors
    from bot.storage.centers import CenterStore
    from bot.storage.connection import make_redis

    redis_server = start_embedded_redis(Path(tempfile.mkdtemp(prefix="bench-semantic-")) / "center.db")
    fact_vectors = FactVectors(embedder, CenterStore(make_redis(redis_server.url)))
    facts = user_facts(next(u for u in load_users() if len(u["facts"]) == 50))
    vectors = {MODEL_FIELD: embedder.model, **fact_vectors.encode(facts.values())}
    packed = packed_facts.pack({k: f.to_json() for k, f in facts.items()}, vectors)
    return fact_vectors, packed, {k: f.category for k, f in facts.items()}, redis_server


if __name__ == "__main__":
    raise SystemExit(main())
