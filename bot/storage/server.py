"""What a Redis server says of itself: INFO memory, of one server or every master of a cluster."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster

from bot.exceptions import StoreUnavailable


@dataclass(frozen=True)
class Memory:
    """What INFO memory says of one Redis server."""

    node: str
    used: int
    peak: int
    maxmemory: int

    @property
    def share(self) -> float | None:
        """Return used / maxmemory, or None when there is no limit."""
        return self.used / self.maxmemory if self.maxmemory else None


def redis_memory(client: Any, label: str) -> list[Memory]:
    """Return INFO memory of a Redis, or of every master of a cluster."""
    try:
        if isinstance(client, RedisCluster):
            by_node = client.info("memory", target_nodes=RedisCluster.PRIMARIES)
            infos = sorted(by_node.items()) if isinstance(by_node, dict) and "used_memory" not in by_node \
                else [(label, by_node)]
        else:
            infos = [(label, client.info("memory"))]
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    return [Memory(f"{label} {node}" if node != label else label, int(info.get("used_memory", 0)),
                   int(info.get("used_memory_peak", 0)), int(info.get("maxmemory", 0)))
            for node, info in infos]
