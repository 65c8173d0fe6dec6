"""Connections to Redis, built once per process and passed to whoever needs them.

User state may live on a Redis Cluster (every user's keys share one slot, so each script
and multi-key command runs on one node); RQ's queues always live on a standalone Redis,
since RQ does not support Cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
import structlog
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

log = structlog.get_logger(__name__)

#: One quick retry covers a dropped connection; more would hold up the reply during an outage.
REDIS_RETRY = Retry(ExponentialBackoff(cap=0.2, base=0.05), retries=1)


def _options(decode_responses: bool, timeout_s: float) -> dict[str, Any]:
    return {
        "decode_responses": decode_responses,
        "socket_connect_timeout": timeout_s,
        "socket_timeout": timeout_s,
        "retry": REDIS_RETRY,
        "health_check_interval": 30,
    }


#: Said by every process that finds a cluster without a queue Redis.
QUEUE_REQUIRED = "QUEUE_REDIS_URL: required when REDIS_URL is a Redis Cluster (RQ keeps its queues on a standalone Redis)"


@dataclass(frozen=True)
class Probe:
    """What one look at a Redis found: whether it runs as a cluster (None: it did not answer)
    and, when it did not answer, why."""

    cluster: bool | None
    error: str | None = None


def probe(url: str, timeout_s: float = 2.0) -> Probe:
    """Ask the Redis at `url` once (INFO cluster): does it answer, is it a cluster node?"""
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    except ValueError as err:  # not a Redis URL
        return Probe(None, str(err))
    try:
        return Probe(bool(client.info("cluster").get("cluster_enabled")))
    except redis.RedisError as err:
        return Probe(None, str(err).splitlines()[0] if str(err) else type(err).__name__)
    finally:
        client.close()


def is_cluster(url: str, timeout_s: float = 2.0) -> bool | None:
    """Return whether the Redis at `url` runs in cluster mode, or None when it does not answer."""
    return probe(url, timeout_s).cluster


def make_redis(
    url: str, decode_responses: bool = True, timeout_s: float = 2.0, cluster: bool = False
) -> Any:
    """Connect lazily to Redis with short timeouts, so an outage degrades fast: a command
    against a Redis that stalls costs at most 4 x timeout_s + 0.3 s (Settings.redis_worst_s).
    With cluster, `url` names any node and the client finds the others (redis.RedisCluster)."""
    if cluster:
        return RedisCluster.from_url(url, **_options(decode_responses, timeout_s))
    return redis.Redis.from_url(url, **_options(decode_responses, timeout_s))
