"""Every Redis key and script the bot uses for conversations, behind one small interface.

Per user, keyed by the E.164 number inside braces (a Redis Cluster hash tag, so all of
one user's keys share a slot and the multi-key scripts below stay cluster-safe):

- ``chat_context:{+E164}`` hash:
  ``summary``; ``recent_messages`` (JSON list of the last RECENT_PAIRS valid pairs);
  ``message_count_since_summary``; ``last_interaction_timestamp`` (Unix seconds);
  ``seq`` (valid pairs ever stored; each pair carries its number ``n``);
  ``summarized_seq`` (the last pair number folded into the summary);
  ``summary_job_at`` / ``summary_job_token`` (a summary job holds the trigger since then;
  its id ends with the token); ``epoch`` (moves on at each reset, so nothing in flight
  from before a reset is stored after it).
- ``chat_pending:{+E164}`` list: valid pairs not yet summarized that have already left the
  recent window, oldest first. Pending pairs = this list + the pairs of
  ``recent_messages`` numbered above ``summarized_seq``, so no pair is stored twice.
- ``chat_seen:{+E164}`` hash: MessageSid -> processing record, for the user's last
  DEDUP_KEEP messages, so a redelivered message gets the same answer and nothing twice.
- ``user_facts:{+E164}`` hash: normalized fact key -> fact JSON (bot/facts.py).
- ``session_facts:{+E164}`` hash: the same, for facts true only for now (a day's TTL;
  cleared by a reset).
- ``user_memory:{+E164}`` hash: ``opted_out``, ``extracted_seq`` (last pair number
  given to fact extraction), ``extract_job_at``, ``erase_requested_at`` and ``stat_*``
  counters (extracted, stored, rejected_low_confidence, conflicts, duplicates, pruned).
- ``org_facts`` hash (not per user): key -> fact JSON, the org scope of memory.

Why scripts and not a lock: each message costs two round trips (claim+load, commit) and
two messages from one user never lose or duplicate a pair, whatever thread or process
handles them. Two messages in flight at once are each answered from the context as it
stood when they arrived; their pairs are appended in the order they complete.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import redis

from bot.exceptions import StoreUnavailable

CONTEXT_PREFIX = "chat_context:"
PENDING_PREFIX = "chat_pending:"
SEEN_PREFIX = "chat_seen:"
FACTS_PREFIX = "user_facts:"
SESSION_FACTS_PREFIX = "session_facts:"
MEMORY_PREFIX = "user_memory:"
#: Shared facts an operator maintains (business hours…); one hash for the whole bot.
ORG_FACTS_KEY = "org_facts"

#: Every per-user key prefix, for inspection, export and erasure.
USER_KEY_PREFIXES = (CONTEXT_PREFIX, PENDING_PREFIX, SEEN_PREFIX, FACTS_PREFIX, SESSION_FACTS_PREFIX, MEMORY_PREFIX)

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
    summary_job_token: str | None = None
    epoch: int = 0  # moves on at every reset


@dataclass(frozen=True)
class Memory:
    """A user's stored facts and memory settings, as raw hash contents."""

    facts: dict[str, str] = field(default_factory=dict)
    session_facts: dict[str, str] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def opted_out(self) -> bool:
        """Return whether the user asked not to be remembered."""
        return self.meta.get("opted_out") == "1"

    @property
    def erase_requested_at(self) -> float | None:
        """Return when the user asked to delete their data, if they did."""
        return _float(self.meta.get("erase_requested_at"))


@dataclass(frozen=True)
class Claim:
    """The outcome of claiming a MessageSid."""

    status: str  # "new", "duplicate" or "inflight"
    context: Context
    reply: str | None = None  # for duplicates: the reply already given
    memory: Memory = field(default_factory=Memory)
    token: str = ""  # proves, at commit, that this attempt still owns the MessageSid


@dataclass(frozen=True)
class CommitResult:
    """What storing a message changed."""

    count_since_summary: int
    summary_due: bool  # this commit claimed the right to enqueue the summary job
    dropped: int  # pending pairs dropped unsummarized because the pending bound was hit
    seq: int = 0  # the number of the user's latest stored pair
    extraction_due: bool = False  # this commit claimed the right to enqueue fact extraction
    pair_stored: bool = False  # False if a reset or a takeover came between claim and commit
    summary_token: str = ""  # the summary job's token, when summary_due
    extraction_token: str = ""  # the extraction job's token, when extraction_due


@dataclass(frozen=True)
class Snapshot:
    """What a summary job works from."""

    summary: str
    pending: list[Pair]
    summarized_seq: int
    triggered_at: float | None = None  # when the summary was triggered (Unix seconds)
    epoch: int = 0
    token: str = ""  # the token of the job holding the trigger


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
    # Fact extraction after every this many valid pairs (0: never).
    extract_every_n_pairs: int = 1
    # Copies of replies already stored in their pair (0: a redelivery reads the pair itself).
    replies_kept: int = 0


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
        summary_job_token=data.get("summary_job_token") or None,
        epoch=int(data.get("epoch", 0) or 0),
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
local function refresh(key, seconds)
  if seconds > 0 and redis.call('EXISTS', key) == 1 then redis.call('EXPIRE', key, seconds) end
end
"""

# KEYS: context, seen, facts, session facts, memory, pending.
# ARGV: sid, now, lease seconds, claim token, seen ttl.
# Returns {status, flat context hash, reply-or-false, facts, session facts, memory,
#          pending pairs (only for a duplicate whose reply lives in its stored pair)}.
_CLAIM = """
local rec = redis.call('HGET', KEYS[2], ARGV[1])
local now = tonumber(ARGV[2])
if rec then
  local r = cjson.decode(rec)
  if r.st == 'done' then
    local older = {}
    if not r.r and r.pair then older = redis.call('LRANGE', KEYS[6], 0, -1) end
    return {'duplicate', redis.call('HGETALL', KEYS[1]), r.r or false, {}, {}, {}, older}
  end
  if now - tonumber(r.ts) < tonumber(ARGV[3]) then
    return {'inflight', {}, false, {}, {}, {}, {}}
  end
end
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({st='pending', ts=now, tok=ARGV[4]}))
if tonumber(ARGV[5]) > 0 then redis.call('EXPIRE', KEYS[2], ARGV[5]) end
return {'new', redis.call('HGETALL', KEYS[1]), false,
        redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4]), redis.call('HGETALL', KEYS[5]), {}}
"""

# KEYS: context, pending, seen, facts, session facts, memory.
# ARGV: 1 sid, 2 now, 3 pair json or '', 4 reply, 5 recent max, 6 dedup keep, 7 ttl,
#       8 summary every n, 9 pending soft bytes, 10 pending max bytes, 11 job lease seconds,
#       12 extract every n (0 = off), 13 facts ttl, 14 session ttl, 15 touch context 1/0,
#       16 claim token, 17 epoch the message was answered in, 18 summary token,
#       19 extraction token, 20 replies kept for redelivery.
# Nothing is written unless this attempt still owns its claim; the pair is stored only if
# no reset came between claim and commit.
# Returns {count since summary, summary due, pairs dropped, seq, extraction due, pair stored}.
_COMMIT = _LUA_HELPERS + """
local sid, now = ARGV[1], tonumber(ARGV[2])
local recent_max, keep, ttl = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local every, soft, hard, lease = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local extract_every, facts_ttl, session_ttl = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])
local replies_kept = tonumber(ARGV[20])
local ctx, pending, seen, facts, session, memory = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local record = {st='done', ts=now, r=ARGV[4]}
local due, dropped, extract_due, stored = 0, 0, 0, 0
local owned = false
local current = redis.call('HGET', seen, sid)
if current then
  local ok, r = pcall(cjson.decode, current)
  owned = ok and r.st == 'pending' and r.tok == ARGV[16]
end
if not owned or ARGV[15] == '0' then
  -- Another attempt took this MessageSid over (it records the outcome), or the user's
  -- data was erased meanwhile or just now: write nothing at all.
  return {0, 0, 0, 0, 0, 0}
end
local seq = num(ctx, 'seq')
local summarized = num(ctx, 'summarized_seq')
if ARGV[3] ~= '' and tostring(num(ctx, 'epoch')) == ARGV[17] then
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
  stored = 1
  record.pair = true
  if count >= every or bytes >= soft then
    local job_at = num(ctx, 'summary_job_at')
    if now - job_at > lease then
      redis.call('HSET', ctx, 'summary_job_at', now, 'summary_job_token', ARGV[18])
      due = 1
    end
  end
  if redis.call('HGET', memory, 'opted_out') == '1' then
    -- not remembered, and never read later either, should the user opt back in
    redis.call('HSET', memory, 'extracted_seq', seq)
  elseif extract_every > 0 then
    local extracted = num(memory, 'extracted_seq')
    local job_at = num(memory, 'extract_job_at')
    if seq - extracted >= extract_every and now - job_at > lease then
      redis.call('HSET', memory, 'extract_job_at', now, 'extract_job_token', ARGV[19])
      extract_due = 1
    end
  end
else
  redis.call('HSETNX', ctx, 'message_count_since_summary', 0)
end
redis.call('HSET', ctx, 'last_interaction_timestamp', ARGV[2])
redis.call('HSET', seen, sid, cjson.encode(record))
-- remember the newest `keep` MessageSids (never evicting one still in flight); a reply
-- stored in its pair is copied only on the newest few (a redelivery finds the rest in the pair)
local all = redis.call('HGETALL', seen)
local done = {}
for j = 1, #all, 2 do
  local ok, r = pcall(cjson.decode, all[j + 1])
  if not ok then
    redis.call('HDEL', seen, all[j])
  elseif r.st == 'done' then
    table.insert(done, {all[j], tonumber(r.ts) or 0, r})
  end
end
table.sort(done, function(a, b) return a[2] > b[2] end)
for j = 1, #done do
  if j > keep then
    redis.call('HDEL', seen, done[j][1])
  elseif j > replies_kept and done[j][3].r and done[j][3].pair then
    done[j][3].r = nil
    redis.call('HSET', seen, done[j][1], cjson.encode(done[j][3]))
  end
end
refresh(ctx, ttl); refresh(pending, ttl); refresh(seen, ttl)
refresh(facts, facts_ttl); refresh(memory, facts_ttl); refresh(session, session_ttl)
return {num(ctx, 'message_count_since_summary'), due, dropped, num(ctx, 'seq'), extract_due, stored}
"""

# KEYS: seen.  ARGV: sid, claim token.  Forget our unfinished claim, so a redelivery retries it.
_RELEASE = """
local rec = redis.call('HGET', KEYS[1], ARGV[1])
if rec then
  local r = cjson.decode(rec)
  if r.st == 'pending' and r.tok == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
end
return 1
"""

# KEYS: context, pending.
# Returns {summary, summarized_seq, recent json, pending list, summary_job_at, epoch, token}.
_SNAPSHOT = """
return {redis.call('HGET', KEYS[1], 'summary') or '',
        redis.call('HGET', KEYS[1], 'summarized_seq') or '0',
        redis.call('HGET', KEYS[1], 'recent_messages') or '[]',
        redis.call('LRANGE', KEYS[2], 0, -1),
        redis.call('HGET', KEYS[1], 'summary_job_at') or '',
        redis.call('HGET', KEYS[1], 'epoch') or '0',
        redis.call('HGET', KEYS[1], 'summary_job_token') or ''}
"""

# KEYS: context, pending.
# ARGV: job token, epoch, summarized up to, new summary, clear recent 1/0, ttl.
# Applies only for the job that holds the trigger, in the epoch it read (no reset since).
# Returns {applied 0/1, count since summary, reason}.
_APPLY_SUMMARY = _LUA_HELPERS + """
local ctx, pending = KEYS[1], KEYS[2]
local upto, ttl = tonumber(ARGV[3]), tonumber(ARGV[6])
if redis.call('HGET', ctx, 'summary_job_token') ~= ARGV[1] then
  return {0, num(ctx, 'message_count_since_summary'), 'superseded'}
end
redis.call('HDEL', ctx, 'summary_job_at', 'summary_job_token')
if tostring(num(ctx, 'epoch')) ~= ARGV[2] then
  return {0, num(ctx, 'message_count_since_summary'), 'reset'}
end
while true do
  local head = redis.call('LINDEX', pending, 0)
  if not head then break end
  local n = tonumber(cjson.decode(head).n) or 0
  if n > upto then break end
  redis.call('LPOP', pending)
end
if ARGV[5] == '1' then
  local kept = {}
  for _, p in ipairs(recent_of(ctx)) do
    if (tonumber(p.n) or 0) > upto then table.insert(kept, p) end
  end
  redis.call('HSET', ctx, 'recent_messages', encode_list(kept))
end
-- pairs dropped for size while the job ran may have moved summarized_seq past upto
local summarized = math.max(num(ctx, 'summarized_seq'), upto)
local count = num(ctx, 'seq') - summarized
redis.call('HSET', ctx, 'summary', ARGV[4], 'summarized_seq', summarized, 'message_count_since_summary', count)
refresh(ctx, ttl); refresh(pending, ttl)
return {1, count, 'applied'}
"""

# KEYS: context, pending, session facts.  ARGV: ttl.
# Clear the conversation (durable facts stay). The epoch moves on, so a message or summary
# job still in flight from before the reset stores nothing. Creates nothing for unknown users.
_RESET = """
local existed = redis.call('EXISTS', KEYS[1], KEYS[2])
redis.call('DEL', KEYS[2], KEYS[3])
if redis.call('EXISTS', KEYS[1]) == 0 then return existed end
local seq = redis.call('HGET', KEYS[1], 'seq') or '0'
redis.call('HSET', KEYS[1], 'summary', '', 'recent_messages', '[]', 'summarized_seq', seq,
           'message_count_since_summary', 0)
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HDEL', KEYS[1], 'summary_job_at', 'summary_job_token')
if tonumber(ARGV[1]) > 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return existed
"""

# KEYS: context.  ARGV: now, token.  Take the summary trigger unconditionally (topic shift):
# a job queued before now holds a stale token and its result will be discarded.
_TAKE_SUMMARY = """
redis.call('HSET', KEYS[1], 'summary_job_at', ARGV[1], 'summary_job_token', ARGV[2])
return 1
"""

# KEYS: context.  ARGV: token.  Free the summary trigger if this job still holds it.
_RELEASE_SUMMARY = """
if redis.call('HGET', KEYS[1], 'summary_job_token') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'summary_job_at', 'summary_job_token')
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
        facts_ttl_seconds: int = 0,
        session_ttl_seconds: int = 86400,
    ) -> None:
        self.redis = client
        self.recent_pairs = recent_pairs
        self.dedup_keep = dedup_keep
        self.ttl_seconds = ttl_seconds
        self.facts_ttl_seconds = facts_ttl_seconds
        self.session_ttl_seconds = session_ttl_seconds
        self.policy = policy or SummaryPolicy()
        self._claim = client.register_script(_CLAIM)
        self._commit = client.register_script(_COMMIT)
        self._release = client.register_script(_RELEASE)
        self._snapshot = client.register_script(_SNAPSHOT)
        self._apply = client.register_script(_APPLY_SUMMARY)
        self._reset = client.register_script(_RESET)
        self._take_summary = client.register_script(_TAKE_SUMMARY)
        self._release_summary = client.register_script(_RELEASE_SUMMARY)

    def _keys(self, user: str) -> tuple[str, str, str]:
        return (
            user_key(CONTEXT_PREFIX, user),
            user_key(PENDING_PREFIX, user),
            user_key(SEEN_PREFIX, user),
        )

    def _memory_keys(self, user: str) -> tuple[str, str, str]:
        return (
            user_key(FACTS_PREFIX, user),
            user_key(SESSION_FACTS_PREFIX, user),
            user_key(MEMORY_PREFIX, user),
        )

    def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return script(keys=keys, args=args)
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    # -- messages ----------------------------------------------------------------------
    def claim(self, user: str, sid: str, now: float | None = None) -> Claim:
        """Claim a MessageSid for processing and load the user's context in one round trip."""
        ctx_key, _, seen_key = self._keys(user)
        now = time.time() if now is None else now
        token = new_token()
        status, flat, reply, facts, session, meta, older = self._call(
            self._claim,
            [ctx_key, seen_key, *self._memory_keys(user), user_key(PENDING_PREFIX, user)],
            [sid, now, INFLIGHT_LEASE_S, token, self.ttl_seconds],
        )
        status = _text(status)
        context = _context_from_hash(_pairs_to_dict(flat))
        previous = _text(reply) if reply else None
        if status == "duplicate" and previous is None:
            stored = context.recent + [Pair.from_obj(json.loads(_text(item))) for item in older]
            previous = next((p.assistant for p in stored if p.sid == sid), None)
        memory = Memory(_pairs_to_dict(facts), _pairs_to_dict(session), _pairs_to_dict(meta))
        return Claim(status=status, context=context, reply=previous, memory=memory, token=token)

    def commit(
        self,
        user: str,
        claim: Claim,
        sid: str,
        reply: str,
        pair: Pair | None,
        now: float | None = None,
        touch_context: bool = True,
    ) -> CommitResult:
        """Record a processed message, storing its pair if valid and still wanted.

        The pair is dropped if a reset came after the claim, or if another attempt took the
        MessageSid over. With touch_context False (right after an erase) only the
        MessageSid is remembered.
        """
        ctx_key, pending_key, seen_key = self._keys(user)
        now = time.time() if now is None else now
        p = self.policy
        summary_token, extraction_token = new_token(), new_token()
        count, due, dropped, seq, extract_due, stored = self._call(
            self._commit,
            [ctx_key, pending_key, seen_key, *self._memory_keys(user)],
            [
                sid,
                now,
                pair.to_json() if pair else "",
                reply,
                self.recent_pairs,
                self.dedup_keep,
                self.ttl_seconds,
                p.every_n_pairs,
                p.soft_bytes,
                p.max_bytes,
                p.job_lease_s,
                p.extract_every_n_pairs,
                self.facts_ttl_seconds,
                self.session_ttl_seconds,
                "1" if touch_context else "0",
                claim.token,
                claim.context.epoch,
                summary_token,
                extraction_token,
                p.replies_kept,
            ],
        )
        return CommitResult(
            count_since_summary=int(count),
            summary_due=bool(due),
            dropped=int(dropped),
            seq=int(seq),
            extraction_due=bool(extract_due),
            pair_stored=bool(stored),
            summary_token=summary_token if due else "",
            extraction_token=extraction_token if extract_due else "",
        )

    def release(self, user: str, claim: Claim, sid: str) -> None:
        """Forget our unfinished claim so that a redelivery is processed afresh."""
        self._call(self._release, [user_key(SEEN_PREFIX, user)], [sid, claim.token])

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
        summary, base, recent_raw, older, job_at, epoch, token = self._call(
            self._snapshot, [ctx_key, pending_key], []
        )
        base_seq = int(_text(base) or 0)
        pending = [Pair.from_obj(json.loads(_text(item))) for item in older]
        pending += [p for p in _decode_pairs(_text(recent_raw)) if p.n > base_seq]
        return Snapshot(
            summary=_text(summary) or "",
            pending=pending,
            summarized_seq=base_seq,
            triggered_at=_float(_text(job_at)),
            epoch=int(_text(epoch) or 0),
            token=_text(token) or "",
        )

    def pending_pairs(self, user: str) -> list[Pair]:
        """Return every valid pair not yet summarized, oldest first."""
        return self.snapshot(user).pending

    # -- summaries and resets ----------------------------------------------------------
    def apply_summary(
        self, user: str, token: str, epoch: int, upto: int, summary: str, clear_recent: bool = False
    ) -> tuple[bool, str]:
        """Store a summary of pairs up to `upto` if this job still holds the trigger and no
        reset came since; return (applied, reason)."""
        ctx_key, pending_key, _ = self._keys(user)
        applied, _count, reason = self._call(
            self._apply,
            [ctx_key, pending_key],
            [token, epoch, upto, summary, "1" if clear_recent else "0", self.ttl_seconds],
        )
        return bool(applied), _text(reason)

    def take_summary(self, user: str, now: float | None = None) -> str:
        """Take the summary trigger for a job queued now (topic shift); return its token."""
        token = new_token()
        now = time.time() if now is None else now
        self._call(self._take_summary, [user_key(CONTEXT_PREFIX, user)], [now, token])
        return token

    def release_summary(self, user: str, token: str) -> bool:
        """Let the next pair trigger a summary again, if this job still holds the trigger."""
        return bool(self._call(self._release_summary, [user_key(CONTEXT_PREFIX, user)], [token]))

    def reset(self, user: str) -> bool:
        """Clear summary, recent and pending pairs and the counter; return whether any existed."""
        ctx_key, pending_key, _ = self._keys(user)
        return bool(
            self._call(self._reset, [ctx_key, pending_key, user_key(SESSION_FACTS_PREFIX, user)], [self.ttl_seconds])
        )

    # -- housekeeping ------------------------------------------------------------------
    def user_keys(self, user: str) -> list[str]:
        """Return every key that may hold this user's data."""
        return [user_key(prefix, user) for prefix in USER_KEY_PREFIXES]

    def ping(self) -> bool:
        """Return whether Redis answers."""
        try:
            return bool(self.redis.ping())
        except redis.RedisError:
            return False


def new_token() -> str:
    """Return a short random token for claims and job triggers."""
    return uuid.uuid4().hex[:16]


def _text(value: Any) -> Any:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _pairs_to_dict(flat: list[Any]) -> dict[str, str]:
    return {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat), 2)}


def key_report(client: redis.Redis, keys: list[str]) -> list[dict[str, Any]]:
    """Return name, type, bytes (MEMORY USAGE) and TTL seconds of each existing key."""
    try:
        with client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.type(key)
                pipe.memory_usage(key, samples=0)  # every field: the default samples 5 and guesses
                pipe.ttl(key)
            raw = pipe.execute()
    except redis.RedisError as err:
        raise StoreUnavailable(str(err)) from err
    report = []
    for i, key in enumerate(keys):
        kind, size, ttl = (_text(raw[3 * i]), raw[3 * i + 1], raw[3 * i + 2])
        if kind == "none":
            continue
        report.append({"key": key, "type": kind, "bytes": int(size or 0), "ttl_s": int(ttl)})
    return report


# -- durable facts ---------------------------------------------------------------------
#: Counters kept per user in user_memory:{+E164} as stat_<name>.
STAT_FIELDS = ("extracted", "stored", "rejected_low_confidence", "conflicts", "duplicates", "pruned")
#: How long a process trusts its copy of the org facts before reading them again.
ORG_CACHE_S = 30.0
#: Optimistic transactions retry this often when a concurrent write touched the same keys.
WATCH_RETRIES = 8


class FactStore:
    """Durable facts per user (and the org's), with optimistic transactions for merges."""

    def __init__(self, client: redis.Redis, *, facts_ttl_seconds: int = 0, session_ttl_seconds: int = 86400) -> None:
        self.redis = client
        self.facts_ttl_seconds = facts_ttl_seconds
        self.session_ttl_seconds = session_ttl_seconds
        self._org: tuple[float, dict[str, Any]] | None = None

    def _scope_key(self, user: str, scope: str) -> str:
        return user_key(SESSION_FACTS_PREFIX if scope == "session" else FACTS_PREFIX, user)

    def _ttl(self, scope: str) -> int:
        return self.session_ttl_seconds if scope == "session" else self.facts_ttl_seconds

    @staticmethod
    def decode(raw: dict[str, str]) -> dict[str, Any]:
        """Turn a facts hash into Fact objects, skipping corrupt entries."""
        from bot.facts import Fact

        out = {}
        for key, value in raw.items():
            fact = Fact.from_json(_text(key), _text(value))
            if fact is not None:
                out[fact.key] = fact
        return out

    def load(self, user: str, scope: str = "user") -> dict[str, Any]:
        """Return the user's facts of one scope (user or session)."""
        try:
            return self.decode(self.redis.hgetall(self._scope_key(user, scope)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def meta(self, user: str) -> dict[str, str]:
        """Return the user's memory settings and counters."""
        try:
            return {_text(k): _text(v) for k, v in self.redis.hgetall(user_key(MEMORY_PREFIX, user)).items()}
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def stats(self, user: str) -> dict[str, int]:
        """Return the user's extraction counters."""
        meta = self.meta(user)
        return {name: int(meta.get(f"stat_{name}", 0) or 0) for name in STAT_FIELDS}

    def merge(
        self,
        user: str,
        scope: str,
        merge: Any,
        *,
        extracted_seq: int | None = None,
        token: str | None = None,
        count_stats: bool = True,
    ) -> Any:
        """Apply merge(existing facts) -> MergeResult atomically; retry if a write raced us.

        With `token` (an extraction job's), nothing is written unless that job still holds
        the extraction trigger and the user has not opted out: an erase or an opt-out while
        the model was thinking wins. Returns None when so refused. With extracted_seq, also
        records extraction progress (never backwards) and frees the trigger.
        """
        facts_key = self._scope_key(user, scope)
        memory_key = user_key(MEMORY_PREFIX, user)
        for _ in range(WATCH_RETRIES):
            try:
                with self.redis.pipeline(transaction=True) as pipe:
                    pipe.watch(facts_key, memory_key)
                    existing = self.decode(pipe.hgetall(facts_key))
                    progress = int(_text(pipe.hget(memory_key, "extracted_seq")) or 0)
                    holder = _text(pipe.hget(memory_key, "extract_job_token"))
                    opted_out = _text(pipe.hget(memory_key, "opted_out")) == "1"
                    if token is not None and (holder != token or opted_out):
                        pipe.unwatch()
                        return None
                    result = merge(existing)
                    pipe.multi()
                    if result.upserts:
                        pipe.hset(facts_key, mapping={k: f.to_json() for k, f in result.upserts.items()})
                    if result.deletes:
                        pipe.hdel(facts_key, *result.deletes)
                    for name, value in result.stats.as_dict().items():
                        if value and count_stats:
                            pipe.hincrby(memory_key, f"stat_{name}", value)
                    if extracted_seq is not None and extracted_seq > progress:
                        pipe.hset(memory_key, "extracted_seq", extracted_seq)
                    if token is not None and extracted_seq is not None:  # the job's last write
                        pipe.hdel(memory_key, "extract_job_at", "extract_job_token")
                    if self._ttl(scope):
                        pipe.expire(facts_key, self._ttl(scope))
                    if self.facts_ttl_seconds:
                        pipe.expire(memory_key, self.facts_ttl_seconds)
                    pipe.execute()
                    return result
            except redis.WatchError:
                continue
            except redis.RedisError as err:
                raise StoreUnavailable(str(err)) from err
        raise StoreUnavailable(f"facts of {user[:4]}… kept changing; gave up after {WATCH_RETRIES} tries")

    def delete(self, user: str, key: str, scope: str = "user") -> bool:
        """Delete one fact; return whether it existed."""
        try:
            return bool(self.redis.hdel(self._scope_key(user, scope), key))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def set_meta(self, user: str, **fields: str | None) -> None:
        """Set (or with None, remove) memory settings such as opted_out."""
        key = user_key(MEMORY_PREFIX, user)
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                present = {k: v for k, v in fields.items() if v is not None}
                absent = [k for k, v in fields.items() if v is None]
                if present:
                    pipe.hset(key, mapping=present)
                if absent:
                    pipe.hdel(key, *absent)
                if self.facts_ttl_seconds:
                    pipe.expire(key, self.facts_ttl_seconds)
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def seen_records(self, user: str) -> dict[str, Any]:
        """Return the user's redelivery records (MessageSid -> record), for export."""
        try:
            raw = self.redis.hgetall(user_key(SEEN_PREFIX, user))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        out = {}
        for sid, record in raw.items():
            try:
                out[_text(sid)] = json.loads(_text(record))
            except ValueError:
                continue
        return out

    def release_extraction(self, user: str, token: str | None = None) -> None:
        """Let the next pair trigger extraction again (if job `token` holds it, when given)."""
        key = user_key(MEMORY_PREFIX, user)
        try:
            if token is None or _text(self.redis.hget(key, "extract_job_token")) == token:
                self.redis.hdel(key, "extract_job_at", "extract_job_token")
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    def erase(self, user: str) -> int:
        """Delete every key of this user, facts included; return how many existed."""
        try:
            return int(self.redis.delete(*(user_key(p, user) for p in USER_KEY_PREFIXES)))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err

    # -- org scope ---------------------------------------------------------------------
    def org_facts(self, fresh: bool = False) -> dict[str, Any]:
        """Return the org's facts, re-read at most every ORG_CACHE_S seconds unless fresh."""
        now = time.monotonic()
        if not fresh and self._org is not None and now - self._org[0] < ORG_CACHE_S:
            return self._org[1]
        try:
            facts = self.decode(self.redis.hgetall(ORG_FACTS_KEY))
        except redis.RedisError as err:
            if self._org is not None:  # serve the stale copy rather than nothing
                return self._org[1]
            raise StoreUnavailable(str(err)) from err
        self._org = (now, facts)
        return facts

    def set_org_facts(self, facts: dict[str, Any], replace_all: bool = False) -> None:
        """Store org facts (key -> Fact); replace_all drops the keys not given (a file reload)."""
        try:
            with self.redis.pipeline(transaction=True) as pipe:
                if replace_all:
                    pipe.delete(ORG_FACTS_KEY)
                if facts:
                    pipe.hset(ORG_FACTS_KEY, mapping={k: f.to_json() for k, f in facts.items()})
                pipe.execute()
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        self._org = None

    def delete_org_fact(self, key: str) -> bool:
        """Delete one org fact; return whether it existed."""
        try:
            existed = bool(self.redis.hdel(ORG_FACTS_KEY, key))
        except redis.RedisError as err:
            raise StoreUnavailable(str(err)) from err
        self._org = None
        return existed
