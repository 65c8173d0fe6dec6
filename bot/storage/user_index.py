"""The users index: every user with a conversation, by last activity (docs/redis-keys.md).

The commit script keeps it (bot/storage/lua/commit.lua, its optional `index` key) on a single
Redis; on a cluster the index is spread over USER_INDEX_BUCKETS keys, each in its own slot,
and the store adds the user right after a commit that wrote their context. A page of the
console's users list is one read per bucket, all in one pipeline; a search by digits is a
ZSCAN with MATCH, run by Redis itself.
"""

from __future__ import annotations

import heapq
import itertools
import zlib
from dataclasses import dataclass
from typing import Iterable

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import USER_INDEX_BUCKETS, USER_INDEX_KEY
from bot.storage.records import text

#: Members read per ZSCAN call when searching.
SCAN_COUNT = 5000


@dataclass(frozen=True)
class Listed:
    """Users in order of last activity, and how many there are in all."""

    users: list[tuple[str, float]]  # (+E164, last interaction), newest first
    total: int


class UserIndex:
    """The users by last activity, in one key or in buckets."""

    def __init__(self, client: redis.Redis, *, buckets: int = 1, keep_s: int = 0) -> None:
        self.redis = client
        self.buckets = buckets  # 1 on a single Redis; USER_INDEX_BUCKETS on a cluster
        self.keep_s = keep_s  # members older than this are gone users (the context's TTL); 0: kept
        self.keys = [USER_INDEX_KEY] if buckets == 1 else [f"{USER_INDEX_KEY}:{{{n}}}" for n in range(buckets)]

    @classmethod
    def for_cluster(cls, client: redis.Redis, keep_s: int = 0) -> UserIndex:
        """Return the index spread over USER_INDEX_BUCKETS keys."""
        return cls(client, buckets=USER_INDEX_BUCKETS, keep_s=keep_s)

    @property
    def in_script(self) -> bool:
        """True when the commit script can write the index itself (one key, one node)."""
        return self.buckets == 1

    def key(self, user: str) -> str:
        """Return the key that holds this user."""
        return self.keys[zlib.crc32(user.encode()) % self.buckets]

    def touch(self, user: str, when: float) -> None:
        """Record the user's last activity (the cluster's path; a single Redis does it in the commit)."""
        self._call(lambda: self.redis.zadd(self.key(user), {user: when}))

    def add_many(self, found: Iterable[tuple[str, float]]) -> int:
        """Add users with their last activity (a reindex); return how many."""
        by_key: dict[str, dict[str, float]] = {}
        for user, when in found:
            by_key.setdefault(self.key(user), {})[user] = when
        if by_key:
            self._call(lambda: self._per_key(lambda pipe, key: pipe.zadd(key, by_key[key]), list(by_key)))
        return sum(len(members) for members in by_key.values())

    def remove(self, user: str) -> None:
        """Take the user out (an erase)."""
        self._call(lambda: self.redis.zrem(self.key(user), user))

    def page(self, offset: int, count: int, now: float) -> Listed:
        """Return `count` users from `offset`, newest activity first, and the total."""
        since = self._since(now)
        # One key reads just the page; buckets each give their first offset+count to merge.
        start, num = (offset, count) if self.buckets == 1 else (0, offset + count)

        def read(pipe, key: str) -> None:  # type: ignore[no-untyped-def]
            if since > 0:
                pipe.zremrangebyscore(key, "-inf", f"({since}")
            pipe.zrevrangebyscore(key, "+inf", since, start=start, num=num, withscores=True)
            pipe.zcount(key, since, "+inf")

        per_key = self._call(lambda: self._per_key(read))  # [pruned?, range, count] for each key
        merged = heapq.merge(*([(text(u), float(s)) for u, s in r[-2]] for r in per_key), key=lambda m: (-m[1], m[0]))
        skip = offset - start
        return Listed([m for i, m in enumerate(merged) if skip <= i < skip + count], sum(int(r[-1]) for r in per_key))

    def search(self, digits: str, now: float) -> list[tuple[str, float]]:
        """Return every user whose number holds these digits, newest activity first."""
        since = self._since(now)
        found: list[tuple[str, float]] = []

        def scan() -> None:
            for key in self.keys:
                for member, score in self.redis.zscan_iter(key, match=f"*{digits}*", count=SCAN_COUNT):
                    if score >= since:
                        found.append((text(member), float(score)))

        self._call(scan)
        return sorted(found, key=lambda m: (-m[1], m[0]))

    def counts(self, now: float, windows: dict[str, float]) -> dict[str, int]:
        """Return how many users were active within each window (seconds), and the total."""
        since = self._since(now)
        names = [*windows, "total"]
        starts = [max(now - windows[n], since) for n in windows] + [since]
        per_key = self._call(lambda: self._per_key(lambda pipe, key: [pipe.zcount(key, s, "+inf") for s in starts]))
        return {name: sum(int(counted[i]) for counted in per_key) for i, name in enumerate(names)}

    def _since(self, now: float) -> float:
        return now - self.keep_s if self.keep_s > 0 else 0

    def _per_key(self, queue, keys: list[str] | None = None) -> list[list]:  # type: ignore[no-untyped-def,type-arg]
        """Queue commands for each key in one pipeline; return each key's results, in order."""
        sizes = []
        with self.redis.pipeline(transaction=False) as pipe:
            for key in keys if keys is not None else self.keys:
                queued = len(pipe)
                queue(pipe, key)
                sizes.append(len(pipe) - queued)
            raw = pipe.execute()
        ends = list(itertools.accumulate(sizes))
        return [raw[end - size:end] for size, end in zip(sizes, ends)]

    @staticmethod
    def _call(work):  # type: ignore[no-untyped-def]
        try:
            return work()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
