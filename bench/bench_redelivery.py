"""Measure what redelivery records (chat_seen) cost in Redis: with replies, and once stripped.

Prints figures; asserts nothing. Runs a private embedded Redis.

    .venv/bin/python bench/bench_redelivery.py
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bot.dev.embedded import start_embedded_redis  # noqa: E402
from bot.storage.connection import make_redis  # noqa: E402
from bot.storage.context import CommitRecord, ContextStore  # noqa: E402
from bot.storage.keys import SEEN_PREFIX, user_key  # noqa: E402
from bot.storage.records import Pair  # noqa: E402
from bot.storage.redelivery import RedeliveryPolicy  # noqa: E402

USER = "+14155550100"
MESSAGES = 20
REPLY = "x" * 400  # a typical WhatsApp-length reply


def answer(store: ContextStore, now: float, reply: str) -> None:
    """Claim and commit one message at `now`."""
    sid = "SM" + uuid.uuid4().hex
    claim = store.claim(USER, sid, now=now)
    store.commit(CommitRecord(USER, claim, sid, reply, Pair("q" * 60, reply, now, sid)), now=now)


def main() -> int:
    """Print bytes per message of chat_seen inside and after the reply window."""
    with tempfile.TemporaryDirectory() as tmp:
        embedded = start_embedded_redis(Path(tmp) / "bench.db")
        try:
            client = make_redis(embedded.url)
            policy = RedeliveryPolicy(window_s=900, reply_s=120, max_records=200)
            store = ContextStore(client, recent_pairs=5, redelivery=policy)
            start = 1_000_000.0
            for i in range(MESSAGES):
                answer(store, start + i, REPLY)
            with_replies = client.memory_usage(user_key(SEEN_PREFIX, USER), samples=0) or 0
            answer(store, start + policy.reply_s + 60, "ok")  # strips every reply past 2 minutes
            stripped = client.memory_usage(user_key(SEEN_PREFIX, USER), samples=0) or 0
        finally:
            embedded.stop()
    print(f"{MESSAGES} records with {len(REPLY)}-char replies: {with_replies} B ({with_replies / MESSAGES:.0f} per message)")
    print(f"{MESSAGES + 1} records, replies stripped: {stripped} B ({stripped / (MESSAGES + 1):.0f} per message)")
    print("after DEDUP_WINDOW_S without a message: 0 B (the key expires)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
