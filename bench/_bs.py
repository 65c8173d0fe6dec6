"""One message's meaning, timed: its embedding (the real local model over loopback, as the
Procfile's `embed` process serves it) and the knowledge-base search it feeds (BM25 and the
dense ranking fused), at 10,000 chunks. Prints figures; asserts nothing.

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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.config import load_settings  # noqa: E402
from bot.dev.embedding_server import start_embedding_server  # noqa: E402
from bot.dev.knowledge_evaluation import DATA_DIR, load_set  # noqa: E402
from bot.llm.anchors import anchor_vectors  # noqa: E402
from bot.knowledge.chunking import chunk_document  # noqa: E402
from bot.knowledge.extract import extract, kind_of  # noqa: E402
from bot.knowledge.index import KnowledgeIndex  # noqa: E402
from bot.llm.embeddings import MessageVector, make_embedder  # noqa: E402
from bot.llm.tokens import TokenCounter  # noqa: E402
from bot.storage.knowledge import StoredChunk  # noqa: E402

CHUNKS = 10_000
MESSAGES = 200
READY, AFTER, SEARCH = [], [], []
import sys
if len(sys.argv) > 1: sys.setswitchinterval(float(sys.argv[1]))


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
        embedder = make_embedder(settings)
        assert embedder is not None
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
        print(f"indexing: {len(texts)} chunks embedded in {index_s:.1f} s on one core "
              f"= {index_s / len(texts) * 1000:.0f} s per 1,000 chunks")
        anchors = [(v, embedder.model) for v in anchor_vectors(embedder)]
        rng = np.random.default_rng(7)
        chunks = []
        for i in range(CHUNKS):
            body, language = texts[i % len(texts)]
            vector = np.frombuffer(real[i % len(real)], dtype=np.float32) + rng.normal(0, 0.01, 384).astype(np.float32)
            chunks.append(StoredChunk(f"d{i // 50}#{i % 50 + 1}", f"d{i // 50}", "Doc", language,
                                      f"{body} (item {i})", 160, vector.astype(np.float32).tobytes(), embedder.model))
        built = time.perf_counter()
        index = KnowledgeIndex("1", chunks, model=embedder.model, anchors=anchors)
        print(f"index build at {CHUNKS:,} chunks: {time.perf_counter() - built:.1f} s")
        asked = [q.question for q in questions]
        embed_ms, total_ms = [], []
        for n in range(MESSAGES):
            question = asked[n % len(asked)] + ("" if n < len(asked) else f" {n}")  # no cache anywhere
            start = time.perf_counter()
            vector = MessageVector(embedder, question, 0.8)
            done = []
            vector._future.add_done_callback(lambda f: done.append(time.perf_counter()))
            got_at = []
            def timed_get():
                v = vector.get(); got_at.append(time.perf_counter()); return v
            hits = index.search(question, limit=8, question_vector=timed_get)
            end = time.perf_counter()
            READY.append((done[0] - start) * 1000); AFTER.append((got_at[0] - done[0]) * 1000); SEARCH.append((end - got_at[0]) * 1000)
            assert hits
            got = vector.get()
            assert got is not None
            total_ms.append((end - start) * 1000)
            # the embedding alone, for comparison (the same question again, timed on its own)
            t = time.perf_counter()
            embedder.query(question, deadline_s=0.8, purpose="bench")
            embed_ms.append((time.perf_counter() - t) * 1000)
        print(f"{MESSAGES} messages at {CHUNKS:,} chunks, one core each side:")
        print(f"  embedding alone (openai SDK over loopback): p50 {statistics.median(embed_ms):.1f} ms, "
              f"p99 {pct(embed_ms, 99):.1f} ms")
        print(f"  embedding + BM25 + dense, overlapped as on the message path: p50 {statistics.median(total_ms):.1f} ms, "
              f"p99 {pct(total_ms, 99):.1f} ms")
        print('vector ready p50', statistics.median(READY), 'p99', pct(READY, 99))
        print('ready->get p50', statistics.median(AFTER), 'p99', pct(AFTER, 99))
        print('get->end p50', statistics.median(SEARCH), 'p99', pct(SEARCH, 99))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
