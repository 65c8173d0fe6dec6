"""WhatsApp's 24-hour window and the held messages (bot/storage/window.py) on the real Redis,
one Redis or the cluster."""

from __future__ import annotations

import time

import pytest

from bot.storage.keys import CONTEXT_PREFIX, WINDOW_PREFIX, user_key
from bot.storage.window import HELD_MAX, WindowStore
from tests.conftest import USER

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def store(redis_client) -> WindowStore:  # type: ignore[no-untyped-def]
    return WindowStore(redis_client, window_s=86_400, held_ttl_s=3600)


def test_the_window_opens_with_each_message_and_closes_a_day_later(store: WindowStore, redis_client) -> None:  # type: ignore[no-untyped-def]
    assert not store.state(USER).open and store.state(USER).last_inbound is None
    now = time.time()
    assert store.opened(USER, now) == 0
    state = store.state(USER, now + 60)
    assert state.open and state.closes_at == pytest.approx(now + 86_400, abs=0.01)
    assert 86_000 < redis_client.ttl(user_key(WINDOW_PREFIX, USER)) <= 86_400
    assert not store.state(USER, now + 86_401).open


def test_a_user_who_wrote_before_the_window_was_kept_counts_from_their_last_interaction(  # type: ignore[no-untyped-def]
        store: WindowStore, redis_client) -> None:
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), "last_interaction_timestamp", time.time() - 600)
    assert store.state(USER).open
    redis_client.hset(user_key(CONTEXT_PREFIX, USER), "last_interaction_timestamp", time.time() - 90_000)
    assert not store.state(USER).open


def test_held_messages_are_taken_once_in_order(store: WindowStore) -> None:
    assert store.hold(USER, "first", "whatsapp:+14155238886", "person") == 1
    assert store.hold(USER, "second", "whatsapp:+14155238886", "reply") == 2
    assert [h["text"] for h in store.held(USER)] == ["first", "second"]
    assert store.opened(USER) == 2  # the user writes: two wait for them
    assert [h["text"] for h in store.take_held(USER)] == ["first", "second"]
    assert store.take_held(USER) == [] and store.held(USER) == []
    for n in range(HELD_MAX + 3):
        store.hold(USER, f"m{n}", "whatsapp:+14155238886", "reply")
    assert len(store.held(USER)) == HELD_MAX and store.held(USER)[0]["text"] == "m3"  # the oldest gave way


def test_a_failed_delivery_is_recorded_and_gives_back_what_was_sent(redis_client) -> None:  # type: ignore[no-untyped-def]
    from bot.storage.outbox import OutboxStore

    outbox = OutboxStore(redis_client, outbox_ttl_s=86_400, failed_ttl_s=3600)
    outbox.sent(USER, "SM1", "See you at 10", "whatsapp:+14155238886", "reply")
    sent = outbox.failed(USER, "SM1", "63016")
    assert sent is not None and sent["text"] == "See you at 10"
    assert outbox.failed(USER, "SM1", "63016") is None  # given back once
    assert [f["code"] for f in outbox.failures(USER)] == ["63016", "63016"] and outbox.failures(USER)[1]["kind"] == "reply"
