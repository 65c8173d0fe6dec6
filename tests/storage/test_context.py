"""ContextStore contract, run on fakeredis and on a real Redis."""

import json

import pytest
import redis

from bot.exceptions import StoreUnavailable
from bot.storage.connection import make_redis
from bot.storage.context import CommitRecord, ContextStore
from bot.storage.keys import CONTEXT_PREFIX, MEMORY_PREFIX, PENDING_PREFIX, SEEN_PREFIX, Ttls, user_key, user_keys
from bot.storage.records import Pair
from bot.storage.redelivery import INFLIGHT_LEASE_S, RedeliveryPolicy
from bot.storage.triggers import SUMMARY, SummaryPolicy

pytestmark = pytest.mark.cluster

USER = "+14155550100"


@pytest.fixture(params=["fakeredis", "redis"])
def client(request: pytest.FixtureRequest) -> redis.Redis:
    if request.param == "fakeredis":
        return request.getfixturevalue("fake_redis")
    return request.getfixturevalue("redis_client")


POLICY = SummaryPolicy(every_n_pairs=10, soft_bytes=100_000, max_bytes=200_000, job_lease_s=900)
REDELIVERY = RedeliveryPolicy(window_s=900, reply_s=120, max_records=50)


@pytest.fixture
def store(client: redis.Redis) -> ContextStore:
    return ContextStore(client, recent_pairs=5, redelivery=REDELIVERY, ttls=Ttls(context=3600), policy=POLICY)


def pair(i: int) -> Pair:
    return Pair(user=f"question {i} with enough text", assistant=f"answer {i} with enough text", ts=float(i), sid=f"SM{i}")


def add(store: ContextStore, i: int, valid: bool = True) -> int:
    claim = store.claim(USER, f"SM{i}", now=1000.0 + i)
    assert claim.status == "new"
    return store.commit(CommitRecord(USER, claim, f"SM{i}", f"answer {i}", pair(i) if valid else None), now=1000.0 + i).count_since_summary


def commit(store: ContextStore, sid: str, p: Pair | None, now: float | None = None):  # type: ignore[no-untyped-def]
    claim = store.claim(USER, sid, now=now)
    return store.commit(CommitRecord(USER, claim, sid, "a", p), now=now)


def test_empty_user_has_empty_context(store: ContextStore) -> None:
    context = store.load(USER)
    assert context.summary == "" and context.recent == [] and context.count_since_summary == 0
    assert context.last_interaction is None
    assert store.pending_pairs(USER) == []


def test_five_pairs_fit_the_window(store: ContextStore, client: redis.Redis) -> None:
    for i in range(5):
        assert add(store, i) == i + 1
    assert [p.user for p in store.load(USER).recent] == [pair(i).user for i in range(5)]
    assert client.llen(user_key(PENDING_PREFIX, USER)) == 0
    assert [p.user for p in store.pending_pairs(USER)] == [pair(i).user for i in range(5)]


def test_sixth_pair_moves_the_oldest_to_pending(store: ContextStore, client: redis.Redis) -> None:
    for i in range(6):
        add(store, i)
    context = store.load(USER)
    assert [p.user for p in context.recent] == [pair(i).user for i in range(1, 6)]
    assert context.count_since_summary == 6
    older = client.lrange(user_key(PENDING_PREFIX, USER), 0, -1)
    assert [json.loads(x)["u"] for x in older] == [pair(0).user]
    assert [p.user for p in store.pending_pairs(USER)] == [pair(i).user for i in range(6)]


def test_invalid_message_is_seen_but_not_context(store: ContextStore) -> None:
    add(store, 0)
    assert add(store, 1, valid=False) == 1
    context = store.load(USER)
    assert [p.user for p in context.recent] == [pair(0).user]
    assert context.last_interaction == 1001.0


def test_duplicate_returns_the_stored_reply(store: ContextStore) -> None:
    add(store, 0)
    claim = store.claim(USER, "SM0", now=1005.0)
    assert claim.status == "duplicate" and claim.reply == "answer 0"
    add(store, 1, valid=False)
    assert store.claim(USER, "SM1", now=1005.0).reply == "answer 1"


def test_inflight_claim_blocks_then_expires(store: ContextStore) -> None:
    assert store.claim(USER, "SMx", now=1000.0).status == "new"
    assert store.claim(USER, "SMx", now=1001.0).status == "inflight"
    assert store.claim(USER, "SMx", now=1000.0 + INFLIGHT_LEASE_S + 1).status == "new"


def test_release_lets_a_redelivery_retry(store: ContextStore) -> None:
    claim = store.claim(USER, "SMx")
    store.release(USER, claim, "SMx")
    assert store.claim(USER, "SMx").status == "new"


def test_a_taken_over_claim_stores_nothing(store: ContextStore) -> None:
    """A first attempt that outlived its lease must not store a second copy."""
    first = store.claim(USER, "SMx", now=1000.0)
    second = store.claim(USER, "SMx", now=1000.0 + INFLIGHT_LEASE_S + 1)
    assert store.commit(CommitRecord(USER, second, "SMx", "a", pair(1))).pair_stored
    assert not store.commit(CommitRecord(USER, first, "SMx", "a", pair(1))).pair_stored
    assert len(store.load(USER).recent) == 1


def test_reset_while_in_flight_drops_the_pair(store: ContextStore) -> None:
    add(store, 0)
    in_flight = store.claim(USER, "SMlate")
    store.reset(USER)
    result = store.commit(CommitRecord(USER, in_flight, "SMlate", "old answer", pair(1)))
    assert not result.pair_stored
    assert store.load(USER).recent == []
    assert store.claim(USER, "SMlate").reply == "old answer"  # still answered once


def test_reset_of_an_unknown_user_creates_nothing(store: ContextStore, client: redis.Redis) -> None:
    assert store.reset("+15550001111") is False
    assert client.keys("*15550001111*") == []


def test_redelivery_is_remembered_by_time_not_by_count(store: ContextStore) -> None:
    for i in range(35):  # 35 more messages from the same user, within the window
        add(store, i)
    assert store.claim(USER, "SM0", now=1000.0 + 100).status == "duplicate"
    assert store.claim(USER, "SM0", now=1000.0 + 100).reply == "answer 0"


def test_a_redelivery_gets_the_whole_first_reply(store: ContextStore) -> None:
    long = "word " * 500  # 2500 characters: longer than a stored pair keeps
    claim = store.claim(USER, "SMlong", now=1000.0)
    store.commit(CommitRecord(USER, claim, "SMlong", long, pair(1)), now=1000.0)
    for i in range(12):  # its pair is summarized out of the window meanwhile
        add(store, 100 + i)
    assert store.claim(USER, "SMlong", now=1000.0 + 60).reply == long


def test_after_the_reply_window_a_redelivery_gets_nothing_and_is_still_a_duplicate(
    store: ContextStore, client: redis.Redis
) -> None:
    add(store, 0)  # at 1000.0
    late = store.claim(USER, "SM0", now=1000.0 + REDELIVERY.reply_s + 1)
    assert late.status == "duplicate" and late.reply is None and late.age_s == pytest.approx(REDELIVERY.reply_s + 1)
    claim = store.claim(USER, "SMnext", now=1000.0 + REDELIVERY.reply_s + 5)
    store.commit(CommitRecord(USER, claim, "SMnext", "a", None), now=1000.0 + REDELIVERY.reply_s + 5)
    record = json.loads(client.hget(user_key(SEEN_PREFIX, USER), "SM0"))
    assert "r" not in record  # the copy of the reply is dropped at the next commit


def test_records_leave_after_the_window_and_stale_in_flight_ones_too(store: ContextStore, client: redis.Redis) -> None:
    store.claim(USER, "SMlost", now=1000.0)  # its worker died: never committed
    add(store, 0)  # at 1000.0
    later = 1000.0 + REDELIVERY.window_s + 1
    claim = store.claim(USER, "SMlater", now=later)
    store.commit(CommitRecord(USER, claim, "SMlater", "a", None), now=later)
    assert sorted(client.hkeys(user_key(SEEN_PREFIX, USER))) == ["SMlater"]
    assert 0 < client.ttl(user_key(SEEN_PREFIX, USER)) <= REDELIVERY.window_s


def test_records_are_capped_per_user_but_in_flight_ones_stay(client: redis.Redis) -> None:
    store = ContextStore(client, recent_pairs=5, redelivery=RedeliveryPolicy(900, 120, max_records=10), policy=POLICY)
    in_flight = store.claim(USER, "SMflight", now=999.0)
    for i in range(15):
        add(store, i)
    kept = set(client.hkeys(user_key(SEEN_PREFIX, USER)))
    assert kept == {f"SM{i}" for i in range(5, 15)} | {"SMflight"} and in_flight.status == "new"


def test_every_key_gets_the_ttl(store: ContextStore, client: redis.Redis) -> None:
    for i in range(6):
        add(store, i)
    for prefix in (CONTEXT_PREFIX, PENDING_PREFIX):
        assert 3500 < client.ttl(user_key(prefix, USER)) <= 3600
    assert 800 < client.ttl(user_key(SEEN_PREFIX, USER)) <= REDELIVERY.window_s


def test_unicode_survives_lua(store: ContextStore) -> None:
    p = Pair(user="¿Dónde está 東京? 🎌", assistant="En Japón — “quotes” / slashes \\ ok", ts=1.0, sid="SMu")
    commit(store, "SMu", p)
    [stored] = store.load(USER).recent
    assert (stored.user, stored.assistant, stored.n) == (p.user, p.assistant, 1)


def test_keys_share_one_cluster_slot(store: ContextStore) -> None:
    keys = user_keys(USER)
    assert all("{+14155550100}" in k for k in keys)


def test_redis_errors_become_store_unavailable() -> None:
    dead = make_redis("redis://127.0.0.1:1/0")
    store = ContextStore(dead, recent_pairs=5)
    with pytest.raises(StoreUnavailable):
        store.claim(USER, "SM1")
    with pytest.raises(StoreUnavailable):
        store.reset(USER)
    assert store.ping() is False


# -- summaries -------------------------------------------------------------------------
def test_summary_due_exactly_once_at_n(store: ContextStore) -> None:
    dues = [SUMMARY in commit(store, f"SM{i}", pair(i)).due for i in range(15)]
    assert dues.index(True) == 9 and dues.count(True) == 1  # the 10th pair, once


def test_summary_trigger_comes_back_after_the_lease(store: ContextStore) -> None:
    for i in range(10):
        commit(store, f"SM{i}", pair(i), now=1000.0)
    assert SUMMARY in commit(store, "SMlate", pair(99), now=1000.0 + POLICY.job_lease_s + 1).due


def take(store: ContextStore):  # type: ignore[no-untyped-def]
    token = store.take_trigger(USER, SUMMARY)
    return token, store.snapshot(USER)


def test_apply_summary_consumes_exactly_the_snapshot(store: ContextStore, client: redis.Redis) -> None:
    for i in range(8):
        add(store, i)
    token, snap = take(store)
    assert [p.n for p in snap.pending] == list(range(1, 9))
    for i in range(8, 11):  # arrive while the job runs
        add(store, i)
    assert store.apply_summary(USER, token, snap.epoch, snap.pending[-1].n, "The user asked eight things.")[0]
    context = store.load(USER)
    assert context.summary == "The user asked eight things."
    assert context.count_since_summary == 3
    assert [p.n for p in store.pending_pairs(USER)] == [9, 10, 11]
    assert client.llen(user_key(PENDING_PREFIX, USER)) == 0  # consumed overflow removed
    assert [p.n for p in context.recent] == [7, 8, 9, 10, 11]  # the window is untouched


def test_apply_summary_refuses_stale_state(store: ContextStore) -> None:
    for i in range(6):
        add(store, i)
    token, snap = take(store)
    store.reset(USER)
    assert store.apply_summary(USER, token, snap.epoch, snap.pending[-1].n, "old news") == (False, "superseded")
    assert store.load(USER).summary == ""


def test_apply_summary_refuses_after_a_reset_even_with_the_token(store: ContextStore) -> None:
    for i in range(6):
        add(store, i)
    token, snap = take(store)
    store.reset(USER)
    for i in range(6, 9):
        add(store, i)
    store.scripts.run(  # the same token again
        "take_trigger", {"hash": user_key(CONTEXT_PREFIX, USER)}, {"job": "summary_job", "now": 1.0, "token": token}
    )
    assert store.apply_summary(USER, token, snap.epoch, 6, "old news") == (False, "reset")


def test_superseded_job_cannot_apply_or_release(store: ContextStore) -> None:
    for i in range(6):
        add(store, i)
    old, snap = take(store)
    new, _ = take(store)
    assert not store.release_trigger(USER, SUMMARY, old)
    assert store.apply_summary(USER, old, snap.epoch, 6, "stale")[1] == "superseded"
    assert store.apply_summary(USER, new, snap.epoch, 6, "fresh")[0]


def test_a_drop_during_the_job_does_not_discard_it(client: redis.Redis) -> None:
    policy = SummaryPolicy(every_n_pairs=1000, soft_bytes=100_000, max_bytes=700, job_lease_s=900)
    store = ContextStore(client, recent_pairs=2, policy=policy)
    for i in range(6):
        commit(store, f"SM{i}", pair(i))
    token = store.take_trigger(USER, SUMMARY)
    snap = store.snapshot(USER)
    for i in range(6, 12):  # pending overflows; the oldest are dropped while the job runs
        commit(store, f"SM{i}", pair(i))
    assert store.load(USER).summarized_seq > 0
    applied, _ = store.apply_summary(USER, token, snap.epoch, snap.pending[-1].n, "summary")
    assert applied and store.load(USER).summary == "summary"
    context = store.load(USER)
    assert context.count_since_summary == len(store.pending_pairs(USER))


def test_apply_summary_can_clear_the_recent_window(store: ContextStore) -> None:
    for i in range(4):
        add(store, i)
    token, snap = take(store)
    add(store, 4)
    assert store.apply_summary(USER, token, snap.epoch, 4, "old topic", clear_upto=4)[0]
    assert [p.n for p in store.load(USER).recent] == [5]


def test_clearing_the_window_keeps_pairs_not_folded_in_pending(store: ContextStore, client: redis.Redis) -> None:
    for i in range(4):
        add(store, i)
    token, snap = take(store)
    add(store, 4)
    # a topic shift at pair 4, but only pairs up to 2 could be folded (extraction reads 3 and 4 first)
    assert store.apply_summary(USER, token, snap.epoch, 2, "old topic", clear_upto=4)[0]
    assert [p.n for p in store.load(USER).recent] == [5]
    assert [json.loads(i)["n"] for i in client.lrange(user_key(PENDING_PREFIX, USER), 0, -1)] == [3, 4]
    assert [p.n for p in store.pending_pairs(USER)] == [3, 4, 5]  # nothing lost, nothing twice
    assert store.load(USER).summarized_seq == 2


def test_snapshot_holds_what_a_queued_extraction_has_yet_to_read(store: ContextStore, client: redis.Redis) -> None:
    for i in range(6):
        add(store, i)  # the first pair took the extraction trigger at t=1000 (policy: every pair)
    memory = user_key(MEMORY_PREFIX, USER)
    client.hset(memory, "extracted_seq", 3)
    assert store.snapshot(USER, now=1010.0).extraction_hold == 3
    assert store.snapshot(USER, now=1000.0 + POLICY.job_lease_s + 1).extraction_hold is None  # a lost job
    client.hset(memory, "opted_out", "1")
    assert store.snapshot(USER, now=1010.0).extraction_hold is None  # nothing will read them
    client.hdel(memory, "opted_out", "extract_job_token")
    assert store.snapshot(USER, now=1010.0).extraction_hold is None  # no extraction on the way


def test_reset_clears_conversation_but_not_dedup(store: ContextStore, client: redis.Redis) -> None:
    for i in range(7):
        add(store, i)
    assert store.reset(USER)
    context = store.load(USER)
    assert (context.summary, context.recent, context.count_since_summary) == ("", [], 0)
    assert store.pending_pairs(USER) == []
    assert client.exists(user_key(PENDING_PREFIX, USER)) == 0
    assert store.claim(USER, "SM6").status == "duplicate"
    assert add(store, 100) == 1  # counting starts again


def test_reset_says_whether_there_was_anything_to_clear(store: ContextStore) -> None:
    commit(store, "SM1", None)  # a message, but no pair stored (small talk)
    assert store.reset(USER) is False
    add(store, 2)
    assert store.reset(USER) is True
    assert store.reset(USER) is False  # already cleared


def test_recent_window_is_bounded_by_bytes(client: redis.Redis) -> None:
    store = ContextStore(client, recent_pairs=5, recent_bytes=700, policy=POLICY)
    long = lambda i: Pair(user=f"question {i}", assistant=f"answer {i} " + "x" * 280, ts=float(i))  # noqa: E731
    for i in range(5):
        commit(store, f"SM{i}", long(i))
    raw = client.hget(user_key(CONTEXT_PREFIX, USER), "recent_messages")
    assert raw is not None and len(raw) <= 700
    assert [p.n for p in store.load(USER).recent] == [4, 5]  # the newest that fit, newest last
    # the older pairs left for the summary: none is lost
    assert [p.n for p in store.pending_pairs(USER)] == [1, 2, 3, 4, 5]
    # the newest pair always stays, even alone past the bound
    commit(store, "SM9", Pair(user="q", assistant="y" * 900, ts=9.0))
    assert [p.n for p in store.load(USER).recent] == [6]


def test_pending_is_bounded_by_bytes(client: redis.Redis) -> None:
    policy = SummaryPolicy(every_n_pairs=1000, soft_bytes=100_000, max_bytes=1000, job_lease_s=900)
    store = ContextStore(client, recent_pairs=5, policy=policy)
    dropped = sum(commit(store, f"SM{i}", pair(i)).dropped for i in range(40))
    items = client.lrange(user_key(PENDING_PREFIX, USER), 0, -1)
    assert sum(len(x.encode()) for x in items) <= 1000 and dropped > 0
    pending = store.pending_pairs(USER)
    assert pending[-1].n == 40 and store.load(USER).count_since_summary == len(pending)


def test_pairs_and_facts_written_in_the_old_format_still_read(store: ContextStore, client: redis.Redis) -> None:
    """Before the compact encodings: long JSON keys, float times, the MessageSid kept."""
    from bot.storage.keys import FACTS_PREFIX
    from bot.storage.facts import FactStore

    old_pair = {"user": "old question", "assistant": "old answer", "ts": 1700000000.25, "sid": "SMold", "n": 1}
    client.hset(user_key(CONTEXT_PREFIX, USER), mapping={"recent_messages": json.dumps([old_pair]), "seq": 1})
    [read] = store.load(USER).recent
    assert (read.user, read.assistant, read.ts, read.sid, read.n) == ("old question", "old answer", 1700000000.25, "SMold", 1)
    add(store, 5)  # a new pair next to it is written compactly; the old one stays readable
    stored = json.loads(client.hget(user_key(CONTEXT_PREFIX, USER), "recent_messages"))
    assert stored[-1] == {"u": pair(5).user, "a": pair(5).assistant, "t": 5, "n": 2}
    assert [p.user for p in store.load(USER).recent] == ["old question", pair(5).user]
    old_fact = {"value": "Lisbon", "category": "location", "confidence": 0.9, "importance": 0.7, "source": "auto",
                "created_at": 1700000000.123, "updated_at": 1700000001.5, "provenance": "SMabc"}
    client.hset(user_key(FACTS_PREFIX, USER), "city", json.dumps(old_fact))
    city = FactStore(client).load(USER)["city"]
    assert (city.value, city.category, city.confidence, city.provenance) == ("Lisbon", "location", 0.9, "SMabc")


def test_facts_pack_small_and_round_trip() -> None:
    from bot.storage.records import Fact

    fact = Fact("city", "Lisbon | Alfama", "location", 0.92, 0.7, "explicit", 1700000000.9, 1700000100.2, "#12")
    raw = fact.to_json()
    assert raw == "~1|l|920|700|e|1700000000|1700000100|#12|Lisbon | Alfama" and len(raw) <= 64
    back = Fact.from_json("city", raw)
    assert back is not None and (back.value, back.category, back.confidence, back.importance, back.source) == (
        "Lisbon | Alfama", "location", 0.92, 0.7, "explicit")
    assert (back.created_at, back.updated_at, back.provenance) == (1700000000, 1700000100, "#12")
    flagged = Fact("city", "Porto", "location", 0.8, conflict={"value": "Lisbon", "confidence": 0.8})
    assert Fact.from_json("city", flagged.to_json()).conflict == {"value": "Lisbon", "confidence": 0.8}  # JSON


def test_only_the_newest_records_keep_their_reply(client: redis.Redis) -> None:
    """A burst of long replies must not pile up in Redis for the whole reply window."""
    store = ContextStore(client, recent_pairs=5, redelivery=RedeliveryPolicy(900, 120, 50, replies_kept=3), policy=POLICY)
    for i in range(8):
        add(store, i)
    records = {k: json.loads(v) for k, v in client.hgetall(user_key(SEEN_PREFIX, USER)).items()}
    assert sorted(k for k, r in records.items() if "r" in r) == ["SM5", "SM6", "SM7"] and len(records) == 8
    assert store.claim(USER, "SM1", now=1010.0).status == "duplicate"  # still recognised


def test_a_recent_list_with_corrupt_elements_is_cleaned_not_fatal(store: ContextStore, client: redis.Redis) -> None:
    client.hset(user_key(CONTEXT_PREFIX, USER), "recent_messages", '[1, "x", {"u": "kept", "a": "yes", "n": 1}]')
    for i in range(6):
        add(store, i)  # evicts past the window: a corrupt element would be indexed here
    assert [p.user for p in store.load(USER).recent] == [pair(i).user for i in range(1, 6)]


def test_scripts_run_twice_by_a_client_retry_answer_as_the_first_time(store: ContextStore) -> None:
    """redis-py re-sends a command after a read timeout, even when the first run executed."""
    real = store.scripts.run

    def twice(name, keys, args):  # type: ignore[no-untyped-def]
        real(name, keys, args)  # the run whose answer was lost to the timeout
        return real(name, keys, args)

    for i in range(9):
        add(store, i)
    store.scripts.run = twice  # type: ignore[method-assign]
    claim = store.claim(USER, "SMretry", now=1100.0)
    assert claim.status == "new"  # not "inflight" because of its own first run
    result = store.commit(CommitRecord(USER, claim, "SMretry", "a", pair(9)), now=1100.0)
    assert result.pair_stored and SUMMARY in result.due and result.seq == 10  # the 10th pair, once
    assert store.load(USER).seq == 10
