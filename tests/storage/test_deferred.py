"""The deferred messages' store (bot/storage/deferred.py) on the real Redis, one Redis or the
cluster: a queue per user with one runner's hold, a redelivery known, a reply marked once,
and a hold given up after a job failed for good."""

from __future__ import annotations

import pytest

from bot.storage.deferred import ALREADY_SENT, SEND, DeferredStore
from bot.storage.keys import DEFERRED_RUN_PREFIX, user_key
from tests.conftest import USER

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def store(redis_client) -> DeferredStore:  # type: ignore[no-untyped-def]
    return DeferredStore(redis_client, turn_s=120.0)


def test_a_queue_has_one_runner_and_a_redelivery_changes_nothing(store: DeferredStore) -> None:
    first = store.push(USER, "MM1", {"kind": "voice", "body": ""})
    second = store.push(USER, "MM2", {"kind": "behind", "body": "and on Sunday?"})
    assert first.status != second.status and first.token  # the first starts a runner, the second waits behind
    assert store.push(USER, "MM1", {"kind": "voice", "body": ""}).status == "known"
    assert [q.sid for q in store.queued(USER)] == ["MM1", "MM2"] and store.waiting(USER)
    head = store.head(USER)
    assert head is not None and head.sid == "MM1" and not head.sending
    assert store.mark_sending(USER, "MM1", first.token) == SEND
    assert store.mark_sending(USER, "MM1", first.token) == ALREADY_SENT  # a redone job sends nothing twice
    assert store.pop(USER, "MM1", first.token) == "more"
    assert store.pop(USER, "MM2", first.token) == "idle" and store.queued(USER) == []


def test_a_failed_runner_gives_up_its_hold_and_the_next_message_starts_one(store: DeferredStore, redis_client) -> None:  # type: ignore[no-untyped-def]
    pushed = store.push(USER, "MM1", {"kind": "voice", "body": ""})
    assert not store.release(USER, "not-its-token")  # only the holder gives it up
    assert store.release(USER, pushed.token) and not store.waiting(USER)
    assert not redis_client.exists(user_key(DEFERRED_RUN_PREFIX, USER))
    assert [q.sid for q in store.queued(USER)] == ["MM1"]  # the queue stays
    again = store.push(USER, "MM2", {"kind": "behind", "body": "hello?"})
    assert again.token and again.token != pushed.token and store.waiting(USER)
