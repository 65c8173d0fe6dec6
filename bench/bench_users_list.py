"""Measure a page of the console's users list at 1,000, 10,000 and 100,000 users: the first
page, a page deep in the list, and a search by digits (p50, p99 and Redis commands each).

Prints figures; asserts nothing. Runs a private embedded Redis.

    .venv/bin/python bench/bench_users_list.py [--sizes 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.dev.embedded import start_embedded_redis  # noqa: E402
from bot.storage.connection import make_redis  # noqa: E402
from bot.storage.context import ContextStore  # noqa: E402
from bot.storage.facts import FactStore  # noqa: E402
from bot.storage.memory_meta import MemoryMetaStore  # noqa: E402
from bot.storage.records import Pair  # noqa: E402
from bot.storage.user_index import UserIndex  # noqa: E402
from bot.users.data import UserData  # noqa: E402
from bot.users.directory import users_page  # noqa: E402

RUNS = 60


def populate(client, index: UserIndex, start: int, stop: int, now: float) -> None:  # type: ignore[no-untyped-def]
    """Store users start..stop as the app would: a context with two pairs, usage, and the index."""
    pairs = json.dumps([Pair("When do you open on Sunday?", "We open at 10:00 on Sundays.", now, n=n).to_obj()
                        for n in (1, 2)])
    for base in range(start, stop, 1000):
        chunk = range(base, min(base + 1000, stop))
        with client.pipeline(transaction=False) as pipe:
            for i in chunk:
                user = f"+1555{i:07d}"
                pipe.hset(f"chat_context:{{{user}}}", mapping={"recent_messages": pairs, "last_interaction_timestamp": now - i})
                pipe.hset(f"user_usage:{{{user}}}", mapping={"reply|gpt-4o-mini|in": 900, "reply|gpt-4o-mini|out": 120,
                                                             "reply|gpt-4o-mini|calls": 2})
            pipe.execute()
        index.add_many((f"+1555{i:07d}", now - i) for i in chunk)


def measure(client, work: Callable[[], object]) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    """Return p50 and p99 milliseconds and the Redis commands of one call."""
    times, commands = [], []
    for _ in range(RUNS):
        before = client.info("stats")["total_commands_processed"]
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1000)
        commands.append(client.info("stats")["total_commands_processed"] - before - 1)  # less the INFO itself
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1], statistics.median(commands)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    now = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        embedded = start_embedded_redis(Path(tmp) / "bench.db")
        try:
            client = make_redis(embedded.url)
            index = UserIndex(client, keep_s=30 * 86400)
            data = UserData(client, ContextStore(client, recent_pairs=5, index=index), FactStore(client),
                            MemoryMetaStore(client), index=index)
            stored = 0
            print(f"{'users':>8}  {'page':<14} {'p50 ms':>8} {'p99 ms':>8} {'commands':>9}")
            for size in sizes:
                populate(client, index, stored, size, now)
                stored = size
                deep = max(1, size // 50 // 2)
                for label, work in (("first page", lambda: users_page(data, "", 1, now)),
                                    (f"page {deep}", lambda: users_page(data, "", deep, now)),
                                    ("search 0099", lambda: users_page(data, "0099", 1, now)),
                                    ("search 555000", lambda: users_page(data, "555000", 1, now))):
                    p50, p99, commands = measure(client, work)
                    print(f"{size:>8}  {label:<14} {p50:>8.2f} {p99:>8.2f} {commands:>9.0f}")
        finally:
            embedded.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
