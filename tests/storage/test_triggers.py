"""One trigger rule for every background job: a new job is a table entry, not a branch."""

from __future__ import annotations

from dataclasses import dataclass

import fakeredis

from bot.storage.context import CommitRecord, ContextStore
from bot.storage.keys import MEMORY_PREFIX, user_key
from bot.storage.records import Pair
from bot.storage.triggers import EXTRACTION, SUMMARY, SummaryPolicy, TriggerRule
import pytest

pytestmark = pytest.mark.cluster

USER = "+14155550100"


@dataclass(frozen=True)
class WithThirdJob(SummaryPolicy):
    """The policy with one more background job, the way entity extraction would add one."""

    def triggers(self) -> tuple[TriggerRule, ...]:
        return (*super().triggers(), TriggerRule("entities", "memory", "entities_seq", "entities_job", every=3))


def store_pair(store: ContextStore, i: int, now: float = 1000.0):  # type: ignore[no-untyped-def]
    claim = store.claim(USER, f"SM{i}", now=now)
    p = Pair(user=f"question {i} with enough text", assistant=f"answer {i}", ts=now, sid=f"SM{i}")
    return store.commit(CommitRecord(USER, claim, f"SM{i}", "a", p), now=now)


def test_a_third_job_is_one_more_table_entry(fake_redis: fakeredis.FakeRedis) -> None:
    store = ContextStore(fake_redis, recent_pairs=5, policy=WithThirdJob(extract_every_n_pairs=0, idle_summary=False))
    due = [sorted(store_pair(store, i).due) for i in range(7)]
    assert due == [[], [], ["entities"], [], [], [], []]  # due at 3 unread, then held by its job
    token = fake_redis.hget(user_key(MEMORY_PREFIX, USER), "entities_job_token")
    assert token and store.release_trigger(USER, "entities", token)
    assert sorted(store_pair(store, 7).due) == ["entities"]  # 8 unread: due again once free


def test_skip_field_moves_the_cursor_instead_of_triggering(fake_redis: fakeredis.FakeRedis) -> None:
    store = ContextStore(fake_redis, recent_pairs=5, policy=SummaryPolicy(extract_every_n_pairs=1))
    fake_redis.hset(user_key(MEMORY_PREFIX, USER), "opted_out", "1")
    assert EXTRACTION not in store_pair(store, 0).due
    assert fake_redis.hget(user_key(MEMORY_PREFIX, USER), "extracted_seq") == "1"


def test_early_bytes_make_the_summary_due_before_n(fake_redis: fakeredis.FakeRedis) -> None:
    policy = SummaryPolicy(every_n_pairs=100, soft_bytes=200, max_bytes=10_000, extract_every_n_pairs=0)
    store = ContextStore(fake_redis, recent_pairs=1, policy=policy)
    due = [SUMMARY in store_pair(store, i).due for i in range(6)]
    assert True in due and due.index(True) < 5
