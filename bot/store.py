"""Every Redis key and script the bot uses, behind one small interface.

Per user, keyed by the E.164 number inside braces (a Redis Cluster hash tag, so all of
one user's keys share a slot and the multi-key scripts below stay cluster-safe):

- ``chat_context:{+E164}`` hash: ``summary``, ``recent_messages`` (JSON list of the last
  RECENT_PAIRS valid pairs), ``message_count_since_summary``, ``last_interaction_timestamp``.
- ``chat_pending:{+E164}`` list: valid pairs not yet summarized that have already left the
  recent window, oldest first. Pending pairs = this list + the newest
  ``min(count, RECENT_PAIRS)`` entries of ``recent_messages``, so no pair is stored twice.
- ``chat_seen:{+E164}`` hash: MessageSid -> processing record, for the user's last
  DEDUP_KEEP messages, so a redelivered message gets the same answer and nothing twice.

Why scripts and not a lock: each message costs two round trips (claim+load, commit) and
two messages from one user never lose or duplicate a pair, whatever thread or process
handles them. Two messages in flight at once are each answered from the context as it
stood when they arrived; their pairs are appended in the order they complete.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from bot.exceptions import StoreUnavailable

CONTEXT_PREFIX = "chat_context:"
PENDING_PREFIX = "chat_pending:"
SEEN_PREFIX = "chat_seen:"

#: Every per-user key prefix, for inspection and erasure.
USER_KEY_PREFIXES = (CONTEXT_PREFIX, PENDING_PREFIX, SEEN_PREFIX)

#: A message still "in flight" after this long is taken to be lost (its worker died),
#: and a redelivery may process it again. Twilio gives up on a request after 15 s.
INFLIGHT_LEASE_S = 30


def user_key(prefix: str, user: str) -> str:
    """Return the key for one user, with the number as a cluster hash tag."""
    return f"{prefix}{{{user}}}"


@dataclass(frozen=True)
class Pair:
    """One valid user/assistant exchange."""

    user: str
    assistant: str
    ts: float
    sid: str = ""

    def to_json(self) -> str:
        """Serialize for Redis."""
        return json.dumps(
            {"user": self.user, "assistant": self.assistant, "ts": self.ts, "sid": self.sid},
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> "Pair":
        """Build from a decoded JSON object."""
        return cls(
            user=str(obj.get("user", "")),
            assistant=str(obj.get("assistant", "")),
            ts=float(obj.get("ts", 0) or 0),
            sid=str(obj.get("sid", "")),
        )


@dataclass
class Context:
    """What the reply prompt is built from."""

    summary: str = ""
    recent: list[Pair] = field(default_factory=list)
    count_since_summary: int = 0
    last_interaction: float | None = None


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a MessageSid."""

    status: str  # "new", "duplicate" or "inflight"
    context: Context
    reply: str | None = None  # for duplicates: the reply already given


def _decode_pairs(raw: str | bytes | None) -> list[Pair]:
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(items, list):  # cjson writes an empty list as {}
        return []
    return [Pair.from_obj(item) for item in items if isinstance(item, dict)]


def _context_from_hash(data: dict[str, str]) -> Context:
    last = data.get("last_interaction_timestamp")
    return Context(
        summary=data.get("summary", "") or "",
        recent=_decode_pairs(data.get("recent_messages")),
        count_since_summary=int(data.get("message_count_since_summary", 0) or 0),
        last_interaction=float(last) if last else None,
    )


# KEYS: context, seen.  ARGV: sid, now, lease seconds.
# Returns {status, flat context hash, reply-or-false}.
_CLAIM = """
local rec = redis.call('HGET', KEYS[2], ARGV[1])
local now = tonumber(ARGV[2])
if rec then
  local r = cjson.decode(rec)
  if r.st == 'done' then
    return {'duplicate', redis.call('HGETALL', KEYS[1]), r.r or false}
  end
  if now - tonumber(r.ts) < tonumber(ARGV[3]) then
    return {'inflight', {}, false}
  end
end
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({st='pending', ts=now}))
return {'new', redis.call('HGETALL', KEYS[1]), false}
"""

# KEYS: context, pending, seen.
# ARGV: sid, now, pair json or '', reply to remember or '', recent max, dedup keep, ttl seconds.
# Returns the new message_count_since_summary.
_COMMIT = """
local sid, now = ARGV[1], tonumber(ARGV[2])
local recent_max, keep, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local count = tonumber(redis.call('HGET', KEYS[1], 'message_count_since_summary') or '0')
local record = {st='done', ts=now}
if ARGV[3] ~= '' then
  local pair = cjson.decode(ARGV[3])
  local raw = redis.call('HGET', KEYS[1], 'recent_messages')
  local recent = {}
  if raw then
    local ok, decoded = pcall(cjson.decode, raw)
    if ok and type(decoded) == 'table' then recent = decoded end
  end
  table.insert(recent, pair)
  count = count + 1
  while #recent > recent_max do
    local evicted = table.remove(recent, 1)
    -- the evicted pair is the (recent_max+1)th newest: still pending if count says so
    if count > #recent then
      redis.call('RPUSH', KEYS[2], cjson.encode(evicted))
    end
  end
  redis.call('HSET', KEYS[1], 'recent_messages', cjson.encode(recent),
             'message_count_since_summary', count)
  record.pair = true
else
  redis.call('HSETNX', KEYS[1], 'message_count_since_summary', count)
end
if ARGV[4] ~= '' then record.r = ARGV[4] end
redis.call('HSET', KEYS[1], 'last_interaction_timestamp', ARGV[2])
redis.call('HSET', KEYS[3], sid, cjson.encode(record))
-- remember only the newest `keep` MessageSids
local n = redis.call('HLEN', KEYS[3])
if n > keep then
  local all = redis.call('HGETALL', KEYS[3])
  local entries = {}
  for i = 1, #all, 2 do
    local ok, r = pcall(cjson.decode, all[i + 1])
    local ts = (ok and tonumber(r.ts)) or 0
    table.insert(entries, {all[i], ts})
  end
  table.sort(entries, function(a, b) return a[2] < b[2] end)
  for i = 1, n - keep do redis.call('HDEL', KEYS[3], entries[i][1]) end
end
if ttl > 0 then
  for i = 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], ttl) end
  end
end
return count
"""

# KEYS: seen.  ARGV: sid.  Forget a claim whose processing failed, so a redelivery retries it.
_RELEASE = """
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if rec and cjson.decode(rec).st == 'pending' then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
"""


class ContextStore:
    """Per-user conversation state in Redis."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        recent_pairs: int,
        dedup_keep: int,
        ttl_seconds: int = 0,
    ) -> None:
        self.redis = client
        self.recent_pairs = recent_pairs
        self.dedup_keep = dedup_keep
        self.ttl_seconds = ttl_seconds
        self._claim = client.register_script(_CLAIM)
        self._commit = client.register_script(_COMMIT)
        self._release = client.register_script(_RELEASE)

    def _keys(self, user: str) -> tuple[str, str, str]:
        return (
            user_key(CONTEXT_PREFIX, user),
            user_key(PENDING_PREFIX, user),
            user_key(SEEN_PREFIX, user),
        )

    def claim(self, user: str, sid: str, now: float | None = None) -> Claim:
        """Claim a MessageSid for processing and load the user's context in one round trip."""
        ctx_key, _, seen_key = self._keys(user)
        now = time.time() if now is None else now
        try:
            status, flat, reply = self._claim(keys=[ctx_key, seen_key], args=[sid, now, INFLIGHT_LEASE_S])
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        status = _text(status)
        data = {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat), 2)}
        context = _context_from_hash(data)
        previous = _text(reply) if reply else None
        if status == "duplicate" and previous is None:
            previous = next((p.assistant for p in context.recent if p.sid == sid), None)
        return Claim(status=status, context=context, reply=previous)

    def commit(
        self,
        user: str,
        sid: str,
        reply: str,
        pair: Pair | None,
        now: float | None = None,
    ) -> int:
        """Record a processed message, storing its pair if valid; return the pending count."""
        ctx_key, pending_key, seen_key = self._keys(user)
        now = time.time() if now is None else now
        # A stored pair carries its reply; only replies outside context need their own copy.
        remembered = "" if pair is not None else reply
        try:
            count = self._commit(
                keys=[ctx_key, pending_key, seen_key],
                args=[
                    sid,
                    now,
                    pair.to_json() if pair else "",
                    remembered,
                    self.recent_pairs,
                    self.dedup_keep,
                    self.ttl_seconds,
                ],
            )
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return int(count)

    def release(self, user: str, sid: str) -> None:
        """Forget an unfinished claim so that a redelivery is processed afresh."""
        try:
            self._release(keys=[user_key(SEEN_PREFIX, user)], args=[sid])
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def load(self, user: str) -> Context:
        """Return the user's context without claiming anything."""
        try:
            data = self.redis.hgetall(user_key(CONTEXT_PREFIX, user))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return _context_from_hash({_text(k): _text(v) for k, v in data.items()})

    def pending_pairs(self, user: str) -> list[Pair]:
        """Return every valid pair not yet summarized, oldest first."""
        ctx_key, pending_key, _ = self._keys(user)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                pipe.lrange(pending_key, 0, -1)
                pipe.hmget(ctx_key, ["recent_messages", "message_count_since_summary"])
                older, (recent_raw, count_raw) = pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        count = int(_text(count_raw) or 0)
        recent = _decode_pairs(_text(recent_raw) if recent_raw else None)
        in_recent = recent[len(recent) - min(count, len(recent)) :] if count else []
        return [Pair.from_obj(json.loads(item)) for item in older] + in_recent

    def user_keys(self, user: str) -> list[str]:
        """Return every key that may hold this user's data."""
        return [user_key(prefix, user) for prefix in USER_KEY_PREFIXES]

    def ping(self) -> bool:
        """Return whether Redis answers."""
        try:
            return bool(self.redis.ping())
        except redis.RedisError:
            return False


def _text(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def key_report(client: redis.Redis, keys: list[str]) -> list[dict[str, Any]]:
    """Return name, type, bytes (MEMORY USAGE) and TTL seconds of each existing key."""
    with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.type(key)
            pipe.memory_usage(key)
            pipe.ttl(key)
        raw = pipe.execute()
    report = []
    for i, key in enumerate(keys):
        kind, size, ttl = (_text(raw[3 * i]), raw[3 * i + 1], raw[3 * i + 2])
        if kind == "none":
            continue
        report.append({"key": key, "type": kind, "bytes": int(size or 0), "ttl_s": int(ttl)})
    return report
