"""Usage per user (bot/storage/usage.py) and the entity store's version, on the real Redis."""

from __future__ import annotations

import pytest

from bot.storage.keys import MEMORY_PREFIX, USAGE_PREFIX, user_key
from bot.storage.usage import Usage, UsageStore
from tests.conftest import USER

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def test_a_job_that_ends_after_an_erase_counts_nothing(redis_client) -> None:  # type: ignore[no-untyped-def]
    usage = UsageStore(redis_client, ttl_seconds=3600)
    assert not usage.add(USER, "summary", "gpt-4o-mini", 100, 20)  # no data: erased, or never here
    assert not redis_client.exists(user_key(USAGE_PREFIX, USER))
    redis_client.hset(user_key(MEMORY_PREFIX, USER), "opted_out", "0")
    assert usage.add(USER, "summary", "gpt-4o-mini", 100, 20) and usage.add(USER, "summary", "gpt-4o-mini", 5, 1)
    [row] = usage.load(USER)
    assert (row.purpose, row.prompt_tokens, row.completion_tokens, row.calls) == ("summary", 105, 21, 2)
    assert 0 < redis_client.ttl(user_key(USAGE_PREFIX, USER)) <= 3600


def test_a_family_price_covers_the_dated_snapshots_the_api_names() -> None:
    prices = {"gpt-4o": (2.5, 10.0), "gpt-4o-mini": (0.15, 0.6)}
    assert Usage("reply", "gpt-4o-mini-2024-07-18", 1_000_000, 0, 1).cost(prices) == pytest.approx(0.15)
    assert Usage("reply", "gpt-4o-2024-08-06", 0, 1_000_000, 1).cost(prices) == pytest.approx(10.0)
    assert Usage("reply", "llama3", 10, 10, 1).cost(prices) is None


def test_the_entities_version_never_repeats_after_an_erase(services) -> None:  # type: ignore[no-untyped-def]
    from bot.storage.entities import EntityState

    seen = set()
    for _ in range(2):
        for _write in range(2):
            token = services.store.take_trigger(USER, "entities")
            services.entities.update(USER, token, lambda s: EntityState(s.entities, s.read | {bytes([_write, 1, 2])}, "1"))
            seen.add(services.entities.version(USER))
        services.redis.delete(*[user_key(p, USER) for p in (MEMORY_PREFIX, "user_entities:")])  # an erase
    assert len(seen) == 4  # a counter would have given "1", "2", "1", "2": a stale index would match
