"""Connections to Redis, built once per process and passed to whoever needs them."""

from __future__ import annotations

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

#: One quick retry covers a dropped connection; more would hold up the reply during an outage.
REDIS_RETRY = Retry(ExponentialBackoff(cap=0.2, base=0.05), retries=1)


def make_redis(url: str, decode_responses: bool = True) -> redis.Redis:
    """Connect lazily to Redis with short timeouts, so an outage degrades fast."""
    return redis.Redis.from_url(
        url,
        decode_responses=decode_responses,
        socket_connect_timeout=2,
        socket_timeout=5,
        retry=REDIS_RETRY,
        health_check_interval=30,
    )
