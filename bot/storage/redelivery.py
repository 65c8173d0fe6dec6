"""Redelivery records: which MessageSids a user's messages had, and how each was answered.

Key ``chat_seen:{+E164}`` hash: MessageSid -> ``{st: pending|done, ts, tok?, r?: reply,
pair?: true}`` for the user's last DEDUP_KEEP answered messages (one in flight is never
evicted). The claim and commit scripts (lua/claim.lua, lua/commit.lua) write it; a reply
stored as a pair is found in the pair instead of being copied.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from bot.exceptions import StoreUnavailable
from bot.storage.keys import SEEN_PREFIX, user_key
from bot.storage.records import text

#: A message still "in flight" after this long is taken to be lost (its worker died),
#: and a redelivery may process it again. Twilio gives up on a request after 15 s.
INFLIGHT_LEASE_S = 30


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
