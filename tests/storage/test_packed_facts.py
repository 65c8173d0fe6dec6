"""A user's facts and vectors packed into one string: what goes in comes out, an unreadable
string reads as empty (and says so), and users stored before it (two hashes) still read and
count (bot/storage/packed_facts.py)."""

from __future__ import annotations

import fakeredis
from structlog.testing import capture_logs

from bot.storage import packed_facts
from bot.storage.records import Fact
import pytest

pytestmark = pytest.mark.cluster

FACTS = {f"fact_{i}": Fact(f"fact_{i}", f"valor número {i} — com acentos", "preference", 0.9, 0.5).to_json()
         for i in range(50)}
VECTORS = {"~m": "multilingual-e5-small-q4", **{k: "A" * 63 + "=" for k in FACTS}}


def test_what_is_packed_comes_out_as_it_went_in() -> None:
    raw = packed_facts.pack(FACTS, VECTORS)
    assert raw.startswith(packed_facts.TAG) and raw.isascii()
    assert packed_facts.unpack(raw) == (FACTS, VECTORS)
    assert packed_facts.read_stored(raw.encode()) == (FACTS, VECTORS)


def test_vectors_without_their_fact_are_dropped() -> None:
    facts, vectors = packed_facts.unpack(packed_facts.pack({"a": FACTS["fact_1"]}, {"~m": "m", "a": "x", "gone": "y"}))
    assert facts == {"a": FACTS["fact_1"]} and vectors == {"~m": "m", "a": "x"}
    assert packed_facts.unpack(packed_facts.pack({"a": FACTS["fact_1"]}, {"~m": "m"}))[1] == {}  # a model, no vector


def test_an_unreadable_string_reads_as_empty_and_is_logged() -> None:
    for raw in ("F1:not base64 at all \x00", "{\"value\": \"Ana\"}", packed_facts.TAG + "00000"):
        with capture_logs() as logs:
            assert packed_facts.unpack(raw) == ({}, {})
        assert logs[0]["event"] == "memory.facts_unreadable" and "Ana" not in str(logs)


def test_users_stored_before_it_read_and_count_from_their_hashes() -> None:
    client = fakeredis.FakeRedis(decode_responses=True)
    client.hset("f", mapping=FACTS)
    client.hset("v", mapping=VECTORS)
    assert packed_facts.read(client, "f", "v") == (FACTS, VECTORS)
    flat_facts = [x for kv in FACTS.items() for x in kv]
    assert packed_facts.read_stored(flat_facts, [x for kv in VECTORS.items() for x in kv]) == (FACTS, VECTORS)
    assert packed_facts.read(client, "none", "v") == ({}, {})
    with client.pipeline(transaction=False) as pipe:
        for key in ("f", "p", "none"):
            pipe.get(key)
            pipe.hlen(key)
        client.set("p", packed_facts.pack(dict(list(FACTS.items())[:3]), {}))
        raw = pipe.execute(raise_on_error=False)
    assert packed_facts.is_wrong_type(raw[0]) and not packed_facts.is_wrong_type(ValueError("WRONGTYPE"))
    assert [packed_facts.count(raw[i], raw[i + 1]) for i in (0, 2, 4)] == [50, 3, 0]
