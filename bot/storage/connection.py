"""Connections to Redis, built once per process and passed to whoever needs them."""

from __future__ import annotations

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

#: One quick retry covers a dropped connection; more would hold up the reply during an outage.
REDIS_RETRY = Retry(ExponentialBackoff(cap=0.2, base=0.05), retries=1)


def make_redis(url: str, decode_responses: bool = True, timeout_s: float = 2.0) -> redis.Redis:
    """Connect lazily to Redis with short timeouts, so an outage degrades fast: a command
    against a Redis that stalls costs at most 4 x timeout_s + 0.3 s (Settings.redis_worst_s)."""
    return redis.Redis.from_url(
        url,
        decode_responses=decode_responses,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        retry=REDIS_RETRY,
        health_check_interval=30,
    )
