"""The knowledge base in Redis: atomic add and replace, caps with nothing half-written, the
version, one hash tag (on the real Redis, and the 3-master cluster in the cluster pass)."""

from __future__ import annotations

import time

import pytest
import redis

from bot.storage.keys import KB_KEYS, KB_META_KEY
from bot.storage.knowledge import DocRecord, KnowledgeStore, chunk_json, vector_text
from bot.storage.scripts import UNREAD, Scripts

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def record(doc_id: str = "faq", sha: str = "a" * 64, chunks: int = 2, size: int = 100, **extra: object) -> DocRecord:
    now = time.time()
    fields = dict(id=doc_id, title=doc_id.upper(), source=f"{doc_id}.md", kind="markdown", language="en",
                  sha256=sha, chunks=chunks, bytes=size, added_at=now, updated_at=now)
    fields.update(extra)
    return DocRecord(**fields)  # type: ignore[arg-type]


def texts(n: int, word: str = "delivery") -> list[str]:
    return [chunk_json(f"FAQ › Part {i}\n{word} text {i}", 8) for i in range(1, n + 1)]


def test_keys_share_one_hash_tag() -> None:
    assert all("{kb}" in key for key in KB_KEYS)
    assert len({redis.cluster.key_slot(key.encode()) for key in KB_KEYS}) == 1


def test_add_replace_remove_move_the_version_and_totals(redis_client: redis.Redis) -> None:
    store = KnowledgeStore(redis_client)
    assert store.version() == "0"
    assert store.put(record(chunks=3), texts(3), None, max_chunks=10, max_bytes=10_000).status == "stored"
    assert store.totals() == {"version": 1, "chunks": 3, "bytes": 100}
    # the same content is a no-op: the version stands
    assert store.put(record(chunks=3), texts(3), None, max_chunks=10, max_bytes=10_000).status == "unchanged"
    assert store.version() == "1"
    # the same bytes with another language (or title) are a change: it is stemmed differently
    relabelled = store.put(record(chunks=3, language="pt"), texts(3), None, max_chunks=10, max_bytes=10_000)
    assert (relabelled.status, relabelled.version) == ("stored", "2")
    assert store.documents()["faq"].language == "pt"
    store.put(record(chunks=3), texts(3), None, max_chunks=10, max_bytes=10_000)
    assert store.put(record(chunks=3, language=None), texts(3), None, max_chunks=10, max_bytes=10_000).status == "stored"
    assert store.put(record(chunks=3, language=None), texts(3), None, max_chunks=10, max_bytes=10_000).status == "unchanged"
    store.put(record(chunks=3), texts(3), None, max_chunks=10, max_bytes=10_000)
    # new content replaces every old chunk (3 -> 2)
    result = store.put(record(sha="b" * 64, chunks=2, size=60), texts(2, "hours"), None, max_chunks=10, max_bytes=10_000)
    assert (result.status, result.version) == ("stored", "6")
    snapshot = store.snapshot()
    assert [c.id for c in snapshot.chunks] == ["faq#1", "faq#2"]
    assert all("hours" in c.text for c in snapshot.chunks)
    assert store.totals() == {"version": 6, "chunks": 2, "bytes": 60}
    assert store.remove("faq") == (True, "7")
    assert store.remove("faq") == (False, "7")
    assert store.snapshot().chunks == [] and store.totals()["chunks"] == 0


def test_a_cap_refuses_and_writes_nothing(redis_client: redis.Redis) -> None:
    store = KnowledgeStore(redis_client)
    store.put(record("faq", chunks=3), texts(3), None, max_chunks=5, max_bytes=1_000)
    before = {key: redis_client.dump(key) for key in KB_KEYS}
    too_many = store.put(record("prices", chunks=3), texts(3), None, max_chunks=5, max_bytes=1_000)
    assert (too_many.status, too_many.total) == ("too_many_chunks", 6)
    too_big = store.put(record("prices", chunks=1, size=901), texts(1), None, max_chunks=5, max_bytes=1_000)
    assert (too_big.status, too_big.total) == ("too_many_bytes", 1001)
    assert {key: redis_client.dump(key) for key in KB_KEYS} == before
    # replacing a document counts its new size, not both
    replaced = store.put(record("faq", sha="c" * 64, chunks=5, size=1_000), texts(5), None, max_chunks=5, max_bytes=1_000)
    assert replaced.status == "stored"


def test_vectors_travel_with_their_chunks(redis_client: redis.Redis) -> None:
    store = KnowledgeStore(redis_client)
    vectors = [vector_text(bytes([i]) * 8, "m") for i in range(2)]
    store.put(record(embedding_model="m"), texts(2), vectors, max_chunks=10, max_bytes=10_000)
    assert [c.vector for c in store.snapshot(vectors=True).chunks] == [bytes([0]) * 8, bytes([1]) * 8]
    assert {c.vector_model for c in store.snapshot(vectors=True).chunks} == {"m"}  # the model, with each vector
    assert all(c.vector is None for c in store.snapshot(vectors=False).chunks)
    store.put(record(sha="d" * 64, embedding_model="m", chunks=1), texts(1), vectors[:1], max_chunks=10, max_bytes=10_000)
    assert len(store.snapshot(vectors=True).chunks) == 1
    assert redis_client.hlen("knowledge:{kb}:vectors") == 1


def test_a_vector_stored_bare_takes_its_documents_model(redis_client: redis.Redis) -> None:
    store = KnowledgeStore(redis_client)
    store.put(record(embedding_model="old"), texts(1), [vector_text(b"\x01" * 8, "old").split("|")[1]],
              max_chunks=10, max_bytes=10_000)
    assert [(c.vector, c.vector_model) for c in store.snapshot(vectors=True).chunks] == [(b"\x01" * 8, "old")]


def test_the_gates_baseline_is_kept_apart_from_the_chunks(redis_client: redis.Redis) -> None:
    store = KnowledgeStore(redis_client)
    store.put(record(embedding_model="m"), texts(1), [vector_text(b"\x00" * 8, "m")], max_chunks=10, max_bytes=10_000)
    assert store.anchors_model() == ""
    store.put_anchors([vector_text(b"\x02" * 8, "m"), vector_text(b"\x03" * 8, "m")])
    snapshot = store.snapshot(vectors=True)
    assert store.anchors_model() == "m" and len(snapshot.chunks) == 1
    assert snapshot.anchors == [(b"\x02" * 8, "m"), (b"\x03" * 8, "m")]


def test_many_chunks_are_written_in_batches(redis_client: redis.Redis) -> None:
    store = KnowledgeStore(redis_client)
    store.put(record(chunks=1_203), texts(1_203), None, max_chunks=5_000, max_bytes=10**7)
    assert len(store.snapshot().chunks) == 1_203
    store.put(record(sha="e" * 64, chunks=2), texts(2), None, max_chunks=5_000, max_bytes=10**7)
    assert redis_client.hlen("knowledge:{kb}:chunks") == 2


def test_a_script_reads_fields_in_the_same_round_trip(redis_client: redis.Redis) -> None:
    scripts = Scripts(redis_client, "kb_snapshot")
    KnowledgeStore(redis_client).put(record(chunks=1), texts(1), None, max_chunks=5, max_bytes=10_000)
    keys = {"meta": KB_META_KEY, "docs": "knowledge:{kb}:docs", "chunks": "knowledge:{kb}:chunks",
            "vectors": "knowledge:{kb}:vectors"}
    result, read = scripts.run_with_reads("kb_snapshot", keys, {}, [(KB_META_KEY, "version"), (KB_META_KEY, "none")])
    assert result[0] == "1" and read == ["1", None]
    redis_client.script_flush()  # as after a Redis restart: the script is loaded again
    result, read = scripts.run_with_reads("kb_snapshot", keys, {}, [(KB_META_KEY, "version")])
    assert result[0] == "1" and read == [UNREAD]
