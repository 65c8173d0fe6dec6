"""The handover store and the activity counters (bot/storage/handover.py, activity.py), on a
fresh in-memory Redis: pure storage logic."""

from __future__ import annotations

from datetime import datetime, timezone

import fakeredis
import pytest

from bot.storage.activity import ActivityStore
from bot.storage.handover import PERSON, USER as USER_ROLE, HandoverStore, LogEntry
from bot.storage.keys import HANDOVER_LOG_PREFIX, HANDOVER_PREFIX, user_key
from bot.storage.usage import UsageStore, usage_fields
from tests.conftest import USER

pytestmark = pytest.mark.cluster

NOW = 1_780_000_000.0  # 2026-05-28 20:26:40 UTC


@pytest.fixture
def store(fake_redis: fakeredis.FakeRedis) -> HandoverStore:
    return HandoverStore(fake_redis, ttl_seconds=3600, log_ttl_seconds=86400)


def test_a_takeover_lasts_its_ttl_and_a_second_take_keeps_since_and_the_notice(store, fake_redis) -> None:  # type: ignore[no-untyped-def]
    assert store.get(USER) is None
    taken = store.take(USER, "console:ana", now=NOW)
    assert (taken.by, taken.since, taken.notified) == ("console:ana", NOW, False)
    assert taken.expires_at is not None and 0 < fake_redis.ttl(user_key(HANDOVER_PREFIX, USER)) <= 3600
    assert store.mark_notified(USER) and not store.mark_notified(USER)  # one notice per takeover
    again = store.take(USER, "cli", now=NOW + 60)
    assert (again.by, again.since, again.notified) == ("cli", NOW, True)
    assert store.release(USER) and not store.release(USER) and store.get(USER) is None
    assert not store.mark_notified(USER)  # no takeover: no notice, and nothing created
    assert not fake_redis.exists(user_key(HANDOVER_PREFIX, USER))


def test_state_says_whether_a_log_waits_to_be_folded(store) -> None:  # type: ignore[no-untyped-def]
    assert store.state(USER) == (None, False)
    store.append(USER, LogEntry(USER_ROLE, "hello", NOW))
    handover, log_left = store.state(USER)
    assert handover is None and log_left


def test_the_log_keeps_order_and_fields_and_is_taken_once(store, fake_redis) -> None:  # type: ignore[no-untyped-def]
    store.append(USER, LogEntry(USER_ROLE, "Is my order late? <b>", NOW))
    store.append(USER, LogEntry(PERSON, "Yes, by a day 👋", NOW + 5, by="ana", sid="SM" + "a" * 32, status="sent"))
    assert 0 < fake_redis.ttl(user_key(HANDOVER_LOG_PREFIX, USER)) <= 86400
    entries = store.entries(USER)
    assert [(e.role, e.text) for e in entries] == [("user", "Is my order late? <b>"), ("person", "Yes, by a day 👋")]
    assert entries[1].by == "ana" and entries[1].status == "sent" and entries[1].delivered
    assert [e.text for e in store.entries(USER, start=1)] == ["Yes, by a day 👋"]  # what the page has not shown
    fake_redis.rpush(user_key(HANDOVER_LOG_PREFIX, USER), "not json")  # a corrupt entry is skipped
    assert len(store.take_log(USER)) == 2
    assert store.take_log(USER) == [] and store.entries(USER) == []


def test_a_status_never_goes_back_and_a_failure_keeps_its_code(store) -> None:  # type: ignore[no-untyped-def]
    sid = "SM" + "b" * 32
    store.append(USER, LogEntry(PERSON, "We can help", NOW, by="ana", sid=sid, status="sent"))
    assert store.set_status(USER, sid, "read")
    assert not store.set_status(USER, sid, "delivered")  # late, out of order
    assert not store.set_status(USER, "SM" + "c" * 32, "failed", "63016")  # not a handover message
    assert not store.set_status(USER, sid, "queued")  # not a status we keep
    [entry] = store.entries(USER)
    assert entry.status == "read"
    other = "SM" + "d" * 32
    store.append(USER, LogEntry(PERSON, "Hello again", NOW + 90000, by="ana", sid=other, status="sent"))
    assert store.set_status(USER, other, "failed", "63016")
    failed = store.entries(USER)[1]
    assert (failed.status, failed.code, failed.delivered) == ("failed", "63016", False)
    assert store.entries(USER)[0].status == "read"  # the other entry untouched


def test_activity_counts_answers_per_hour_and_usage_per_day(fake_redis) -> None:  # type: ignore[no-untyped-def]
    activity = ActivityStore(fake_redis, keep_days=8)
    fields = usage_fields("reply", "gpt-4o-mini", 120, 30)
    activity.record(NOW, answered=True, usage=fields)
    activity.record(NOW + 1, answered=True, usage=fields)
    activity.record(NOW - 3600, answered=True)
    activity.record(NOW, answered=False, usage=usage_fields("summary", "gpt-4o-mini", 500, 80))
    activity.record(NOW, answered=False)  # nothing to count: nothing written
    hours = activity.answered(3, NOW)
    assert [count for _, count in hours] == [0, 1, 2]
    assert hours[-1][0] == NOW - NOW % 3600 and hours[0][0] == hours[-1][0] - 7200
    rows = {r.purpose: r for r in activity.usage_on(datetime.fromtimestamp(NOW, timezone.utc))}
    assert (rows["reply"].calls, rows["reply"].prompt_tokens, rows["reply"].completion_tokens) == (2, 240, 60)
    assert rows["summary"].calls == 1
    assert activity.usage_on(datetime.fromtimestamp(NOW + 86400, timezone.utc)) == []
    for key in fake_redis.keys("activity:*"):
        assert 0 < fake_redis.ttl(key) <= 8 * 86400
    assert sorted(fake_redis.keys("activity:*")) == ["activity:answered:2026052819", "activity:answered:2026052820",
                                                       "activity:usage:20260528"]


def test_a_background_jobs_usage_counts_in_the_day_too(fake_redis) -> None:  # type: ignore[no-untyped-def]
    activity = ActivityStore(fake_redis, keep_days=8)
    usage = UsageStore(fake_redis, ttl_seconds=3600, activity=activity)

    class Call:
        model, prompt_tokens, completion_tokens = "gpt-4o-mini", 400, 50

    usage.count_call(USER, "summary", Call())  # the user has no data (erased): not counted anywhere
    assert activity.usage_on(datetime.now(timezone.utc)) == []
    fake_redis.hset(f"chat_context:{{{USER}}}", "seq", 1)
    usage.count_call(USER, "summary", Call())
    [row] = activity.usage_on(datetime.now(timezone.utc))
    assert (row.purpose, row.calls, row.prompt_tokens) == ("summary", 1, 400)
