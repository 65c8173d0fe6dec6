"""Redelivery records: which MessageSids a user's messages had, and how each was answered.

Key ``chat_seen:{+E164}`` hash: MessageSid -> ``{st: pending|done, ts, tok, r?: reply,
p?: pair stored, d?: jobs made due}`` (tok, p and d let a retried script answer as it did)
for the user's messages of the last DEDUP_WINDOW_S. A redelivery inside that window is never
processed twice, however many messages came in between; inside REDELIVERY_REPLY_S (Twilio's
retry horizon) it gets the first reply again, whole. The hash expires DEDUP_WINDOW_S after
the user's last message, so records cost nothing at rest. The claim and commit scripts
(lua/claim.lua, lua/commit.lua) write it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import SEEN_PREFIX, user_key
from bot.storage.records import text

#: A message still "in flight" after this long is taken to be lost (its worker died),
#: and a redelivery may process it again. Twilio gives up on a request after 15 s.
INFLIGHT_LEASE_S = 30


@dataclass(frozen=True)
class RedeliveryPolicy:
    """How long MessageSids and their replies are remembered (settings DEDUP_*, REDELIVERY_*)."""

    window_s: int = 900
    reply_s: int = 120
    max_records: int = 100
    # Only the newest this many records keep a copy of their reply, so a burst of long replies
    # cannot pile up in Redis: two minutes of messages at 20 a minute.
    replies_kept: int = 40


def seen_records(client: redis.Redis, user: str) -> dict[str, Any]:
    """Return the user's redelivery records (MessageSid -> record), for export."""
    try:
        raw = client.hgetall(user_key(SEEN_PREFIX, user))
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    out = {}
    for sid, record in raw.items():
        try:
            out[text(sid)] = json.loads(text(record))
        except ValueError:
            continue
    return out
