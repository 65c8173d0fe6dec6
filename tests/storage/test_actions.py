"""The proposed write and the tool log (bot/storage/actions.py) on the real Redis, one Redis or
the cluster: a proposal taken once by the yes that came after it, its outcome kept for a redone
job, a "no" dropping it, and the calls logged newest first."""

from __future__ import annotations

import time

import pytest

from bot.storage.actions import TOOL_LOG_LENGTH, ActionStore
from bot.storage.keys import ACTION_PREFIX, user_key
from tests.conftest import USER

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

ACTION = {"id": "act_1", "tool": "book_appointment", "arguments": {"day": "2030-01-08", "time": "10:00"},
          "summary": "Book an appointment (day: 2030-01-08; time: 10:00)"}


@pytest.fixture
def store(redis_client) -> ActionStore:  # type: ignore[no-untyped-def]
    return ActionStore(redis_client, confirm_ttl_s=300, log_ttl_s=3600)


def test_a_proposal_is_taken_once_by_the_yes_that_came_after_it(store: ActionStore, redis_client) -> None:  # type: ignore[no-untyped-def]
    at = time.time()
    store.propose(USER, {**ACTION, "sid": "MM_PROPOSED", "at": at})
    assert 0 < redis_client.ttl(user_key(ACTION_PREFIX, USER)) <= 300
    assert store.pending(USER)["tool"] == "book_appointment"  # type: ignore[index]
    assert store.take(USER, "MM_PROPOSED", at + 1) is None  # the proposing message itself never confirms
    assert store.take(USER, "MM_EARLIER", at - 1) is None  # nor one that arrived before the proposal
    taken = store.take(USER, "MM_YES", at + 1)
    assert taken is not None and taken[0]["id"] == "act_1" and taken[1] is None
    assert store.pending(USER) is None  # taken: nothing waits any more
    assert store.take(USER, "MM_ANOTHER_YES", at + 2) is None  # a second yes confirms nothing
    store.finish(USER, "MM_ANOTHER_YES", {"outcome": "ok"})  # only the taker records an outcome
    assert store.take(USER, "MM_YES", at + 1) == (taken[0], None)
    store.finish(USER, "MM_YES", {"outcome": "ok", "status": 201})
    again = store.take(USER, "MM_YES", at + 1)  # a redone job for the same yes finds the outcome
    assert again is not None and again[1] == {"outcome": "ok", "status": 201}
    assert store.drop(USER, at + 3) is None  # a taken proposal is not dropped by a later message


def test_anything_but_yes_drops_the_proposal(store: ActionStore, redis_client) -> None:  # type: ignore[no-untyped-def]
    at = time.time()
    assert store.drop(USER, at) is None
    store.propose(USER, {**ACTION, "sid": "MM_PROPOSED", "at": at})
    assert store.drop(USER, at - 1) is None  # a message from before the proposal is no answer to it
    dropped = store.drop(USER, at + 1)
    assert dropped is not None and dropped["summary"].startswith("Book")
    assert not redis_client.exists(user_key(ACTION_PREFIX, USER)) and store.take(USER, "MM_YES", time.time()) is None


def test_the_tool_log_keeps_the_last_calls_newest_first(store: ActionStore) -> None:
    store.log_calls(USER, [])
    for n in range(TOOL_LOG_LENGTH + 5):
        store.log_calls(USER, [{"tool": "list_free_slots", "outcome": "ok", "n": n}])
    calls = store.calls(USER)
    assert len(calls) == TOOL_LOG_LENGTH and calls[0]["n"] == TOOL_LOG_LENGTH + 4


def test_a_reset_forgets_the_waiting_proposal(store: ActionStore, redis_client) -> None:  # type: ignore[no-untyped-def]
    store.propose(USER, {**ACTION, "sid": "MM_PROPOSED", "at": time.time()})
    store.forget(USER)
    assert not redis_client.exists(user_key(ACTION_PREFIX, USER)) and store.pending(USER) is None
