"""Job ids: a keyed pseudonym of the user; erase finds a user's jobs without a keyspace scan."""

from __future__ import annotations

import hashlib

import pytest
import redis

from bot.jobs.queue import JobQueue
from bot.storage.connection import make_redis
from bot.storage.triggers import EXTRACTION, SUMMARY

USER = "+14155550100"


@pytest.fixture
def queue(queue_redis_url: str, redis_client: redis.Redis) -> JobQueue:
    return JobQueue(make_redis(queue_redis_url, decode_responses=False), [0], "secret-one")


def test_the_pseudonym_is_keyed(queue: JobQueue, queue_redis_url: str) -> None:
    unsalted = hashlib.sha256(USER.encode()).hexdigest()
    assert not unsalted.startswith(queue.tag(USER)[:12])
    other = JobQueue(make_redis(queue_redis_url, decode_responses=False), [0], "secret-two")
    assert other.tag(USER) != queue.tag(USER) and queue.tag(USER) == queue.tag(USER)


def test_purge_finds_a_users_jobs_without_scanning(queue: JobQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = queue.enqueue(SUMMARY, USER, "tok1")
    superseded = queue.enqueue(SUMMARY, USER, "tok0")  # a topic shift took the trigger from it
    theirs = queue.enqueue(EXTRACTION, "+447700900123", "tok2")

    def no_scan(*_args, **_kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("erase must not scan the keyspace")

    monkeypatch.setattr(redis.Redis, "scan_iter", no_scan)
    monkeypatch.setattr(redis.Redis, "scan", no_scan)
    monkeypatch.setattr(redis.Redis, "keys", no_scan)
    assert queue.purge_user(USER, {SUMMARY: "tok1"}) == 2
    assert queue.job_status(mine) is None and queue.job_status(superseded) is None
    assert queue.job_status(theirs) == "queued"
