"""ContextStore contract, run on fakeredis and on a real Redis."""

import json

import pytest
import redis

from bot.exceptions import StoreUnavailable
from bot.services import make_redis
from bot.store import (
    CONTEXT_PREFIX,
    INFLIGHT_LEASE_S,
    PENDING_PREFIX,
    SEEN_PREFIX,
    ContextStore,
    Pair,
    user_key,
)

USER = "+14155550100"


@pytest.fixture(params=["fakeredis", "redis"])
def client(request: pytest.FixtureRequest) -> redis.Redis:
    if request.param == "fakeredis":
        return request.getfixturevalue("fake_redis")
    return request.getfixturevalue("redis_client")


@pytest.fixture
def store(client: redis.Redis) -> ContextStore:
    return ContextStore(client, recent_pairs=5, dedup_keep=4, ttl_seconds=3600)


def pair(i: int) -> Pair:
    return Pair(user=f"question {i} with enough text", assistant=f"answer {i} with enough text", ts=float(i), sid=f"SM{i}")


def add(store: ContextStore, i: int, valid: bool = True) -> int:
    claim = store.claim(USER, f"SM{i}", now=1000.0 + i)
    assert claim.status == "new"
    return store.commit(USER, f"SM{i}", f"answer {i}", pair(i) if valid else None, now=1000.0 + i)


def test_empty_user_has_empty_context(store: ContextStore) -> None:
    context = store.load(USER)
    assert context.summary == "" and context.recent == [] and context.count_since_summary == 0
    assert context.last_interaction is None
    assert store.pending_pairs(USER) == []


def test_five_pairs_fit_the_window(store: ContextStore, client: redis.Redis) -> None:
    for i in range(5):
        assert add(store, i) == i + 1
    assert [p.sid for p in store.load(USER).recent] == [f"SM{i}" for i in range(5)]
    assert client.llen(user_key(PENDING_PREFIX, USER)) == 0
    assert [p.sid for p in store.pending_pairs(USER)] == [f"SM{i}" for i in range(5)]


def test_sixth_pair_moves_the_oldest_to_pending(store: ContextStore, client: redis.Redis) -> None:
    for i in range(6):
        add(store, i)
    context = store.load(USER)
    assert [p.sid for p in context.recent] == [f"SM{i}" for i in range(1, 6)]
    assert context.count_since_summary == 6
    older = client.lrange(user_key(PENDING_PREFIX, USER), 0, -1)
    assert [json.loads(x)["sid"] for x in older] == ["SM0"]
    assert [p.sid for p in store.pending_pairs(USER)] == [f"SM{i}" for i in range(6)]


def test_invalid_message_is_seen_but_not_context(store: ContextStore) -> None:
    add(store, 0)
    assert add(store, 1, valid=False) == 1
    context = store.load(USER)
    assert [p.sid for p in context.recent] == ["SM0"]
    assert context.last_interaction == 1001.0


def test_duplicate_returns_the_stored_reply(store: ContextStore) -> None:
    add(store, 0)
    claim = store.claim(USER, "SM0")
    assert claim.status == "duplicate" and claim.reply == pair(0).assistant
    add(store, 1, valid=False)
    assert store.claim(USER, "SM1").reply == "answer 1"


def test_inflight_claim_blocks_then_expires(store: ContextStore) -> None:
    assert store.claim(USER, "SMx", now=1000.0).status == "new"
    assert store.claim(USER, "SMx", now=1001.0).status == "inflight"
    assert store.claim(USER, "SMx", now=1000.0 + INFLIGHT_LEASE_S + 1).status == "new"


def test_release_lets_a_redelivery_retry(store: ContextStore) -> None:
    store.claim(USER, "SMx")
    store.release(USER, "SMx")
    assert store.claim(USER, "SMx").status == "new"


def test_only_the_newest_sids_are_remembered(store: ContextStore, client: redis.Redis) -> None:
    for i in range(7):
        add(store, i, valid=False)
    assert sorted(client.hkeys(user_key(SEEN_PREFIX, USER))) == ["SM3", "SM4", "SM5", "SM6"]


def test_every_key_gets_the_ttl(store: ContextStore, client: redis.Redis) -> None:
    for i in range(6):
        add(store, i)
    for prefix in (CONTEXT_PREFIX, PENDING_PREFIX, SEEN_PREFIX):
        assert 3500 < client.ttl(user_key(prefix, USER)) <= 3600


def test_unicode_survives_lua(store: ContextStore) -> None:
    store.claim(USER, "SMu")
    p = Pair(user="¿Dónde está 東京? 🎌", assistant="En Japón — “quotes” / slashes \\ ok", ts=1.0, sid="SMu")
    store.commit(USER, "SMu", p.assistant, p)
    assert store.load(USER).recent == [p]


def test_keys_share_one_cluster_slot(store: ContextStore) -> None:
    keys = store.user_keys(USER)
    assert all("{+14155550100}" in k for k in keys)


def test_redis_errors_become_store_unavailable() -> None:
    dead = make_redis("redis://127.0.0.1:1/0")
    store = ContextStore(dead, recent_pairs=5, dedup_keep=4)
    with pytest.raises(StoreUnavailable):
        store.claim(USER, "SM1")
    with pytest.raises(StoreUnavailable):
        store.commit(USER, "SM1", "x", None)
    assert store.ping() is False
