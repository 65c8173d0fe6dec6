"""Every Redis key and script the bot uses for conversations, behind one small interface.

Per user, keyed by the E.164 number inside braces (a Redis Cluster hash tag, so all of
one user's keys share a slot and the multi-key scripts below stay cluster-safe):

- ``chat_context:{+E164}`` hash:
  ``summary``; ``recent_messages`` (JSON list of the last RECENT_PAIRS valid pairs);
  ``message_count_since_summary``; ``last_interaction_timestamp`` (Unix seconds);
  ``seq`` (valid pairs ever stored; each pair carries its number ``n``);
  ``summarized_seq`` (the last pair number folded into the summary);
  ``summary_job_at`` / ``summary_job_id`` (a summary job is queued or running).
- ``chat_pending:{+E164}`` list: valid pairs not yet summarized that have already left the
  recent window, oldest first. Pending pairs = this list + the pairs of
  ``recent_messages`` numbered above ``summarized_seq``, so no pair is stored twice.
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

#: Every per-user key prefix of the conversation, for inspection and erasure.
USER_KEY_PREFIXES = (CONTEXT_PREFIX, PENDING_PREFIX, SEEN_PREFIX)

#: A message still "in flight" after this long is taken to be lost (its worker died),
#: and a redelivery may process it again. Twilio gives up on a request after 15 s.
INFLIGHT_LEASE_S = 30


def user_key(prefix: str, user: str) -> str:
    """Return the key for one user, with the number as a cluster hash tag."""
    return f"{prefix}{{{user}}}"


@dataclass(frozen=True)
class Pair:
    """One valid user/assistant exchange; n is its number among the user's pairs."""

    user: str
    assistant: str
    ts: float
    sid: str = ""
    n: int = 0

    def to_json(self) -> str:
        """Serialize for Redis."""
        obj: dict[str, Any] = {"user": self.user, "assistant": self.assistant, "ts": self.ts, "sid": self.sid}
        if self.n:
            obj["n"] = self.n
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    def to_public(self) -> dict[str, Any]:
        """Return the pair as inspect and export show it."""
        return {"user": self.user, "assistant": self.assistant, "ts": self.ts, "sid": self.sid, "n": self.n}

    @classmethod
    def from_obj(cls, obj: dict[str, Any]) -> "Pair":
        """Build from a decoded JSON object."""
        return cls(
            user=str(obj.get("user", "")),
            assistant=str(obj.get("assistant", "")),
            ts=float(obj.get("ts", 0) or 0),
            sid=str(obj.get("sid", "")),
            n=int(obj.get("n", 0) or 0),
        )


@dataclass
class Context:
    """What the reply prompt is built from."""

    summary: str = ""
    recent: list[Pair] = field(default_factory=list)
    count_since_summary: int = 0
    last_interaction: float | None = None
    seq: int = 0
    summarized_seq: int = 0
    summary_job_at: float | None = None
    summary_job_id: str | None = None


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a MessageSid."""

    status: str  # "new", "duplicate" or "inflight"
    context: Context
    reply: str | None = None  # for duplicates: the reply already given


@dataclass(frozen=True)
class CommitResult:
    """What storing a message changed."""

    count_since_summary: int
    summary_due: bool  # this commit claimed the right to enqueue the summary job
    dropped: int  # pending pairs dropped unsummarized because the pending bound was hit
    seq: int = 0  # the number of the user's latest stored pair


@dataclass(frozen=True)
class Snapshot:
    """What a summary job works from."""

    summary: str
    pending: list[Pair]
    summarized_seq: int
    triggered_at: float | None = None  # when the summary was triggered (Unix seconds)


@dataclass(frozen=True)
class SummaryPolicy:
    """When a summary is due and how far pending pairs may grow without one."""

    every_n_pairs: int = 10
    # Pending pairs outside the recent window are summarized early past this many bytes...
    soft_bytes: int = 2000
    # ...and the oldest are dropped past this, so a user stays small while workers are down.
    max_bytes: int = 4000
    # A queued or running job holds the trigger this long; after it, the next pair re-triggers.
    job_lease_s: int = 900


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


def _float(value: str | None) -> float | None:
    return float(value) if value else None


def _context_from_hash(data: dict[str, str]) -> Context:
    return Context(
        summary=data.get("summary", "") or "",
        recent=_decode_pairs(data.get("recent_messages")),
        count_since_summary=int(data.get("message_count_since_summary", 0) or 0),
        last_interaction=_float(data.get("last_interaction_timestamp")),
        seq=int(data.get("seq", 0) or 0),
        summarized_seq=int(data.get("summarized_seq", 0) or 0),
        summary_job_at=_float(data.get("summary_job_at")),
        summary_job_id=data.get("summary_job_id") or None,
    )


# Shared Lua helpers: decode the recent list whatever cjson made of an empty one.
_LUA_HELPERS = """
local function recent_of(key)
  local raw = redis.call('HGET', key, 'recent_messages')
  if not raw then return {} end
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' then return decoded end
  return {}
end
local function encode_list(t)
  if #t == 0 then return '[]' end
  return cjson.encode(t)
end
local function num(key, fieldname)
  return tonumber(redis.call('HGET', key, fieldname) or '0') or 0
end
"""

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
# ARGV: sid, now, pair json or '', reply to remember or '', recent max, dedup keep, ttl,
#       summary every n, pending soft bytes, pending max bytes, job lease seconds.
# Returns {count since summary, summary due 0/1, pairs dropped, seq}.
_COMMIT = _LUA_HELPERS + """
local sid, now = ARGV[1], tonumber(ARGV[2])
local recent_max, keep, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local every, soft, hard, lease = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local ctx, pending, seen = KEYS[1], KEYS[2], KEYS[3]
local record = {st='done', ts=now}
local due, dropped = 0, 0
local seq = num(ctx, 'seq')
local summarized = num(ctx, 'summarized_seq')
if ARGV[3] ~= '' then
  local pair = cjson.decode(ARGV[3])
  seq = seq + 1
  pair.n = seq
  local recent = recent_of(ctx)
  table.insert(recent, pair)
  while #recent > recent_max do
    local evicted = table.remove(recent, 1)
    if (tonumber(evicted.n) or 0) > summarized then
      redis.call('RPUSH', pending, cjson.encode(evicted))
    end
  end
  -- bound the pending pairs by size: summarize early, and drop the oldest past the limit
  local items = redis.call('LRANGE', pending, 0, -1)
  local bytes = 0
  for i = 1, #items do bytes = bytes + #items[i] end
  local i = 1
  while bytes > hard and i < #items do
    local gone = cjson.decode(items[i])
    summarized = math.max(summarized, tonumber(gone.n) or 0)
    bytes = bytes - #items[i]
    redis.call('LPOP', pending)
    dropped = dropped + 1
    i = i + 1
  end
  local count = seq - summarized
  redis.call('HSET', ctx, 'recent_messages', encode_list(recent), 'seq', seq,
             'summarized_seq', summarized, 'message_count_since_summary', count)
  record.pair = true
  if count >= every or bytes >= soft then
    local job_at = tonumber(redis.call('HGET', ctx, 'summary_job_at') or '0') or 0
    if now - job_at > lease then
      redis.call('HSET', ctx, 'summary_job_at', now)
      due = 1
    end
  end
else
  redis.call('HSETNX', ctx, 'message_count_since_summary', 0)
end
if ARGV[4] ~= '' then record.r = ARGV[4] end
redis.call('HSET', ctx, 'last_interaction_timestamp', ARGV[2])
redis.call('HSET', seen, sid, cjson.encode(record))
-- remember only the newest `keep` MessageSids
local n = redis.call('HLEN', seen)
if n > keep then
  local all = redis.call('HGETALL', seen)
  local entries = {}
  for j = 1, #all, 2 do
    local ok, r = pcall(cjson.decode, all[j + 1])
    table.insert(entries, {all[j], (ok and tonumber(r.ts)) or 0})
  end
  table.sort(entries, function(a, b) return a[2] < b[2] end)
  for j = 1, n - keep do redis.call('HDEL', seen, entries[j][1]) end
end
if ttl > 0 then
  for j = 1, #KEYS do
    if redis.call('EXISTS', KEYS[j]) == 1 then redis.call('EXPIRE', KEYS[j], ttl) end
  end
end
return {num(ctx, 'message_count_since_summary'), due, dropped, num(ctx, 'seq')}
"""

# KEYS: seen.  ARGV: sid.  Forget a claim whose processing failed, so a redelivery retries it.
_RELEASE = """
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if rec and cjson.decode(rec).st == 'pending' then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1
"""

# KEYS: context, pending.
# Returns {summary, summarized_seq, recent json, pending list, summary_job_at}.
_SNAPSHOT = """
return {redis.call('HGET', KEYS[1], 'summary') or '',
        redis.call('HGET', KEYS[1], 'summarized_seq') or '0',
        redis.call('HGET', KEYS[1], 'recent_messages') or '[]',
        redis.call('LRANGE', KEYS[2], 0, -1),
        redis.call('HGET', KEYS[1], 'summary_job_at') or ''}
"""

# KEYS: context, pending.
# ARGV: base summarized_seq, summarized up to, new summary, clear recent 0/1, ttl.
# Applies only if nothing moved summarized_seq since the snapshot (no reset, no drop,
# no other summary). Returns {applied 0/1, count since summary}.
_APPLY_SUMMARY = _LUA_HELPERS + """
local ctx, pending = KEYS[1], KEYS[2]
local base, upto, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[5])
redis.call('HDEL', ctx, 'summary_job_at')
if num(ctx, 'summarized_seq') ~= base then
  return {0, num(ctx, 'message_count_since_summary')}
end
while true do
  local head = redis.call('LINDEX', pending, 0)
  if not head then break end
  local n = tonumber(cjson.decode(head).n) or 0
  if n > upto then break end
  redis.call('LPOP', pending)
end
if ARGV[4] == '1' then
  local kept = {}
  for _, p in ipairs(recent_of(ctx)) do
    if (tonumber(p.n) or 0) > upto then table.insert(kept, p) end
  end
  redis.call('HSET', ctx, 'recent_messages', encode_list(kept))
end
local count = num(ctx, 'seq') - upto
redis.call('HSET', ctx, 'summary', ARGV[3], 'summarized_seq', upto, 'message_count_since_summary', count)
if ttl > 0 then
  for j = 1, #KEYS do
    if redis.call('EXISTS', KEYS[j]) == 1 then redis.call('EXPIRE', KEYS[j], ttl) end
  end
end
return {1, count}
"""

# KEYS: context, pending.  Clear the conversation; seq stays, so no old job can apply.
_RESET = """
local seq = redis.call('HGET', KEYS[1], 'seq') or '0'
local existed = redis.call('EXISTS', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], 'summary', '', 'recent_messages', '[]', 'summarized_seq', seq,
           'message_count_since_summary', 0)
redis.call('HDEL', KEYS[1], 'summary_job_at', 'summary_job_id')
redis.call('DEL', KEYS[2])
return existed
"""

# KEYS: context.  ARGV: now, lease.  Claim the summary trigger outside a commit (topic shift).
_CLAIM_SUMMARY = """
local job_at = tonumber(redis.call('HGET', KEYS[1], 'summary_job_at') or '0') or 0
if tonumber(ARGV[1]) - job_at > tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'summary_job_at', ARGV[1])
  return 1
end
return 0
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
        policy: SummaryPolicy | None = None,
    ) -> None:
        self.redis = client
        self.recent_pairs = recent_pairs
        self.dedup_keep = dedup_keep
        self.ttl_seconds = ttl_seconds
        self.policy = policy or SummaryPolicy()
        self._claim = client.register_script(_CLAIM)
        self._commit = client.register_script(_COMMIT)
        self._release = client.register_script(_RELEASE)
        self._snapshot = client.register_script(_SNAPSHOT)
        self._apply = client.register_script(_APPLY_SUMMARY)
        self._reset = client.register_script(_RESET)
        self._claim_summary = client.register_script(_CLAIM_SUMMARY)

    def _keys(self, user: str) -> tuple[str, str, str]:
        return (
            user_key(CONTEXT_PREFIX, user),
            user_key(PENDING_PREFIX, user),
            user_key(SEEN_PREFIX, user),
        )

    # -- messages ----------------------------------------------------------------------
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
    ) -> CommitResult:
        """Record a processed message, storing its pair if valid."""
        ctx_key, pending_key, seen_key = self._keys(user)
        now = time.time() if now is None else now
        # A stored pair carries its reply; only replies outside context need their own copy.
        remembered = "" if pair is not None else reply
        p = self.policy
        try:
            count, due, dropped, seq = self._commit(
                keys=[ctx_key, pending_key, seen_key],
                args=[
                    sid,
                    now,
                    pair.to_json() if pair else "",
                    remembered,
                    self.recent_pairs,
                    self.dedup_keep,
                    self.ttl_seconds,
                    p.every_n_pairs,
                    p.soft_bytes,
                    p.max_bytes,
                    p.job_lease_s,
                ],
            )
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return CommitResult(int(count), bool(due), int(dropped), int(seq))

    def release(self, user: str, sid: str) -> None:
        """Forget an unfinished claim so that a redelivery is processed afresh."""
        try:
            self._release(keys=[user_key(SEEN_PREFIX, user)], args=[sid])
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    # -- reading -----------------------------------------------------------------------
    def load(self, user: str) -> Context:
        """Return the user's context without claiming anything."""
        try:
            data = self.redis.hgetall(user_key(CONTEXT_PREFIX, user))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return _context_from_hash({_text(k): _text(v) for k, v in data.items()})

    def snapshot(self, user: str) -> Snapshot:
        """Return the summary and every pending pair, oldest first, read atomically."""
        ctx_key, pending_key, _ = self._keys(user)
        try:
            summary, base, recent_raw, older, job_at = self._snapshot(keys=[ctx_key, pending_key])
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        base_seq = int(_text(base) or 0)
        pending = [Pair.from_obj(json.loads(_text(item))) for item in older]
        pending += [p for p in _decode_pairs(_text(recent_raw)) if p.n > base_seq]
        return Snapshot(
            summary=_text(summary) or "",
            pending=pending,
            summarized_seq=base_seq,
            triggered_at=_float(_text(job_at)),
        )

    def pending_pairs(self, user: str) -> list[Pair]:
        """Return every valid pair not yet summarized, oldest first."""
        return self.snapshot(user).pending

    # -- summaries and resets ----------------------------------------------------------
    def apply_summary(self, user: str, base_seq: int, upto: int, summary: str, clear_recent: bool = False) -> bool:
        """Store a summary of pairs up to `upto`, if the state is still what it was built on."""
        ctx_key, pending_key, _ = self._keys(user)
        try:
            applied, _count = self._apply(
                keys=[ctx_key, pending_key],
                args=[base_seq, upto, summary, "1" if clear_recent else "0", self.ttl_seconds],
            )
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        return bool(applied)

    def claim_summary(self, user: str, now: float | None = None) -> bool:
        """Take the summary trigger for this user unless a job already holds it."""
        now = time.time() if now is None else now
        try:
            return bool(
                self._claim_summary(keys=[user_key(CONTEXT_PREFIX, user)], args=[now, self.policy.job_lease_s])
            )
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def note_summary_job(self, user: str, job_id: str) -> None:
        """Remember the id of the user's latest summary job, for inspection."""
        try:
            self.redis.hset(user_key(CONTEXT_PREFIX, user), "summary_job_id", job_id)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def release_summary(self, user: str) -> None:
        """Let the next pair trigger a summary again (after a job failed for good)."""
        try:
            self.redis.hdel(user_key(CONTEXT_PREFIX, user), "summary_job_at")
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def reset(self, user: str) -> bool:
        """Clear summary, recent and pending pairs and the counter; return whether any existed."""
        ctx_key, pending_key, _ = self._keys(user)
        try:
            return bool(self._reset(keys=[ctx_key, pending_key]))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    # -- housekeeping ------------------------------------------------------------------
    def user_keys(self, user: str) -> list[str]:
        """Return every key that may hold this user's conversation."""
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
