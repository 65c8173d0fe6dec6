"""Measure Redis bytes per user at rest: 200 turns, without and with 50 facts; then the
memory of users with 50 realistic facts (`eval memory`'s) and their vectors, embedded by the
real local model and packed with the facts in one string (docs/semantic.md).

Prints figures; asserts nothing. Runs the real storage code (the claim and commit scripts,
summaries applied as the worker applies them, facts merged as extraction merges them) on a
private embedded Redis, with the sizes bench_webhook.py uses: messages of 20-200 characters,
replies of 400, and a summary of 400 characters (what the stand-in writes) or 900 (the most
SUMMARY_MAX_TOKENS, 200 tokens, allows).

"At rest" is after the redelivery window: chat_seen has expired (its TTL is DEDUP_WINDOW_S),
so it is reported apart.

    .venv/bin/python bench/bench_redis_budget.py
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.config import Settings  # noqa: E402
from bot.dev.embedded import start_embedded_redis  # noqa: E402
from bot.memory.rules import merge_facts  # noqa: E402
from bot.storage.connection import make_redis  # noqa: E402
from bot.storage.context import CommitRecord, ContextStore  # noqa: E402
from bot.storage.facts import FactStore  # noqa: E402
from bot.storage.keys import SEEN_PREFIX, Ttls, user_key, user_keys  # noqa: E402
from bot.storage.records import Fact, Pair  # noqa: E402
from bot.storage.triggers import SUMMARY, SummaryPolicy  # noqa: E402

TURNS = 200
FACTS = 50
WORDS = "trip lisbon hotel quiet cheap museum tram dinner budget flight weekend family beach walk".split()
CATEGORIES = ("identity", "location", "preference", "diet", "health", "work", "family", "schedule")


def converse(store: ContextStore, user: str, rng: random.Random, summary_chars: int) -> None:
    """200 turns, with the summary applied whenever the commit asks for one."""
    now = time.time()
    for turn in range(TURNS):
        sid = "SM" + uuid.uuid4().hex
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30)))
        claim = store.claim(user, sid, now=now + turn)
        pair = Pair(user=f"turn {turn}: {text}?", assistant="x" * 400, ts=now + turn, sid=sid)
        result = store.commit(CommitRecord(user, claim, sid, pair.assistant, pair), now=now + turn)
        if SUMMARY in result.due:
            snap = store.snapshot(user)
            store.apply_summary(user, result.due[SUMMARY], snap.epoch, snap.pending[-1].n, "The user " + "s" * (summary_chars - 9))


def learn(facts: FactStore, user: str, rng: random.Random) -> None:
    """50 typical facts: short keys, values of 5 to 30 characters."""
    now = time.time()
    incoming = [
        Fact(
            key=f"fact_{i}_{rng.choice(WORDS)}",
            value=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))[:30],
            category=rng.choice(CATEGORIES),
            confidence=round(rng.uniform(0.7, 1.0), 3),
            importance=round(rng.uniform(0.3, 0.9), 3),
            provenance=f"#{rng.randint(1, TURNS)}",  # the pair it came from, as extraction writes it
        )
        for i in range(FACTS)
    ]
    facts.merge(user, "user", lambda existing: merge_facts(
        existing, incoming, threshold=0.7, max_facts=FACTS, conflict_margin=0.1, now=now))


def sizes(client, user: str) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Return MEMORY USAGE of each of the user's keys (every field counted)."""
    return {key.split(":")[0]: client.memory_usage(key, samples=0) or 0 for key in user_keys(user) if client.exists(key)}


def main() -> int:
    """Print bytes per user, at rest and with redelivery records, without and with facts."""
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        embedded = start_embedded_redis(Path(tmp) / "bench.db")
        try:
            client = make_redis(embedded.url)
            policy = SummaryPolicy(every_n_pairs=10, soft_bytes=4000 // 3, max_bytes=4000, extract_every_n_pairs=0)
            defaults = Settings.model_fields  # the recent window as shipped
            store = ContextStore(
                client,
                recent_pairs=defaults["RECENT_PAIRS"].default,
                recent_bytes=defaults["RECENT_MAX_BYTES"].default,
                ttls=Ttls(context=30 * 86400), policy=policy)
            facts = FactStore(client, facts_ttl_seconds=365 * 86400)
            cases = [(chars, with_facts) for with_facts in (False, True) for chars in (400, 900)]
            for summary_chars, with_facts in cases:
                label = f"{FACTS if with_facts else 'no'} facts, a {summary_chars}-character summary"
                user = f"+1555{rng.randint(0, 9_999_999):07d}"
                converse(store, user, rng, summary_chars)
                if with_facts:
                    learn(facts, user, rng)
                per_key = sizes(client, user)
                seen = per_key.pop(SEEN_PREFIX.rstrip(":"), 0)
                rest = sum(per_key.values())
                detail = ", ".join(f"{k} {v}" for k, v in sorted(per_key.items()))
                print(f"{TURNS} turns, {label}: {rest} B at rest ({detail}); chat_seen in the window: {seen} B")
                assert client.ttl(user_key(SEEN_PREFIX, user)) <= 900  # it does expire
            realistic(client)
        finally:
            embedded.stop()
    return 0


def realistic(client) -> None:  # type: ignore[no-untyped-def]
    """50 realistic facts per user, written as extraction writes them, with their vectors."""
    from bot.dev.embedding_server import start_embedding_server
    from bot.dev.memory_evaluation import load_users, user_facts
    from bot.llm.embeddings import make_embedder
    from bot.memory.vectors import FactVectors
    from bot.storage import packed_facts
    from bot.storage.centers import CenterStore
    from bot.storage.keys import FACTS_PREFIX, VECTORS_PREFIX

    server = start_embedding_server()
    try:
        settings = Settings(_env_file=None, EMBEDDING_BASE_URL=server.url)  # type: ignore[call-arg]
        embedder = make_embedder(settings)
        assert embedder is not None
        store = FactStore(client, facts_ttl_seconds=365 * 86400, vectors=FactVectors(embedder, CenterStore(client)))
        for data in load_users():
            if len(data["facts"]) < 50:
                continue
            user = f"+1555{data['id'][1:]:0>7}"
            incoming = [replace(f, provenance="#123") for f in user_facts(data).values()]
            store.merge(user, "user", lambda existing: merge_facts(
                existing, incoming, threshold=0.0, max_facts=FACTS, conflict_margin=0.1, now=time.time()))
            key = user_key(FACTS_PREFIX, user)
            size = client.memory_usage(key, samples=0) or 0
            assert not client.exists(user_key(VECTORS_PREFIX, user))  # packed with the facts
            _, vectors = packed_facts.read(client, key, user_key(VECTORS_PREFIX, user))
            print(f"{data['id']}, {len(data['facts'])} realistic facts and {len(vectors) - 1} vectors: "
                  f"user_facts {size} B ({client.type(key)}, {client.strlen(key)} characters packed)")
    finally:
        server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
