"""The users index: kept by the commit, read a page at a time, searched by digits, emptied by
an erase, and rebuilt from the keys of a deployment that stored users before it."""

from __future__ import annotations

import time

import pytest
import redis

from bot.services import Services
from bot.storage.context import CommitRecord, ContextStore
from bot.storage.records import Pair
from bot.storage.user_index import UserIndex
from bot.users.directory import PAGE_SIZE, active_users, reindex, users_page
from bot.users.lifecycle import erase_user
from tests.conftest import CLUSTER

pytestmark = pytest.mark.cluster

NOW = 1_800_000_000.0


def numbers(n: int) -> list[str]:
    return [f"+1415555{i:04d}" for i in range(n)]


def test_a_page_is_newest_first_across_buckets(redis_client: redis.Redis) -> None:
    index = UserIndex(redis_client, buckets=4)
    users = numbers(12)
    index.add_many((u, NOW - i) for i, u in enumerate(users))  # users[0] is the newest
    assert len({index.key(u) for u in users}) > 1  # spread over buckets
    first, second = index.page(0, 5, NOW), index.page(5, 5, NOW)
    assert [u for u, _ in first.users] == users[:5] and first.total == 12
    assert [u for u, _ in second.users] == users[5:10]
    assert [u for u, _ in index.page(10, 5, NOW).users] == users[10:]
    assert [u for u, _ in index.search("5550003", NOW)] == [users[3]]
    assert index.counts(NOW, {"minute": 6}) == {"minute": 7, "total": 12}


def test_users_older_than_the_contexts_ttl_are_gone_from_the_list(redis_client: redis.Redis) -> None:
    index = UserIndex(redis_client, keep_s=3600)
    index.add_many([("+14155550001", NOW - 60), ("+14155550002", NOW - 7200)])
    assert [u for u, _ in index.page(0, 10, NOW).users] == ["+14155550001"]
    assert index.counts(NOW, {})["total"] == 1 and index.search("4155550002", NOW) == []
    assert redis_client.zcard(index.keys[0]) == 1  # pruned, not just hidden


def test_the_commit_keeps_the_index_and_an_erase_empties_it(services: Services) -> None:
    store, user = services.store, "+14155550123"
    assert store.index is not None and store.index.in_script is not CLUSTER
    claim = store.claim(user, "SM1")
    store.commit(CommitRecord(user, claim, "SM1", "hello", Pair("hello there", "hi!", time.time())))
    page = users_page(services.users, "", 1)
    assert [row.user for row in page.rows] == [user] and page.total == 1
    assert users_page(services.users, "+1 (415) 555-0123", 1).total == 1
    assert active_users(services.users, time.time())["hour"] == 1
    erase_user(services.users, user, "test", via="test")
    assert users_page(services.users, "", 1).total == 0
    # a commit after the erase (touch_context False) records the MessageSid, not the user
    claim = store.claim(user, "SM2")
    store.commit(CommitRecord(user, claim, "SM2", "erased", None, touch_context=False))
    assert users_page(services.users, "", 1).total == 0


def test_a_store_without_an_index_commits_as_before(redis_client: redis.Redis) -> None:
    store = ContextStore(redis_client, recent_pairs=3)
    claim = store.claim("+14155550124", "SM1")
    assert store.commit(CommitRecord("+14155550124", claim, "SM1", "a", None)).seq == 0


def test_reindex_finds_users_stored_before_the_index(services: Services) -> None:
    users = numbers(PAGE_SIZE + 3)
    with services.redis.pipeline(transaction=False) as pipe:
        for i, user in enumerate(users):
            pipe.hset(f"chat_context:{{{user}}}", mapping={"last_interaction_timestamp": time.time() - i})
        pipe.execute()
    assert users_page(services.users, "", 1).total == 0
    assert reindex(services.users) == len(users)
    first, last = users_page(services.users, "", 1), users_page(services.users, "", 99)
    assert first.pages == 2 and [r.user for r in first.rows] == users[:PAGE_SIZE]
    assert last.number == 2 and [r.user for r in last.rows] == users[PAGE_SIZE:]
