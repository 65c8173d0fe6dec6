-- commit: record a processed message, and store its pair if it is valid and still wanted.
-- KEYS: context pending seen facts session memory entities usage vectors [index]
-- A: sid; now (Unix seconds); token (the claim's: nothing is written unless this attempt
--    still owns the MessageSid; a commit run again with it gets the first run's answer); epoch (the one the message was answered in: a reset since
--    means the pair is not stored); reply (the text sent); pair ({user, assistant, ts, sid},
--    absent when the exchange is not valid context); touch (false right after an erase:
--    only this MessageSid is recorded, so a redelivered YES is answered, not re-run);
--    recent_max (pairs kept in recent_messages); recent_bytes (and no more JSON bytes than
--    this, the newest pair always kept: the rest could not fit the prompt); pending_max (bytes of chat_pending past
--    which the oldest pending pairs are dropped unsummarized); job_lease (seconds a job
--    holds its trigger); window (seconds a MessageSid is remembered: older records are
--    dropped, and chat_seen expires this long after the last message); reply_window
--    (seconds a record keeps its reply for a redelivery); replies_kept (only the newest this
--    many records keep their reply); max_records (MessageSids kept per user inside the
--    window, newest first; one in flight is never evicted); ttl ({context,
--    facts, session} seconds; 0 = no expiry);
--    triggers (the background jobs a stored pair can make due, in order: each
--    {name, hash, cursor, job, every, early_bytes, skip_field?, token}; see
--    bot/storage/triggers.py); usage (optional: {field = tokens}, the turn's model calls,
--    bot/storage/usage.py); last_task (optional: the resolved task, kept for inspect);
--    last_reference (optional: the knowledge-base chunk ids and scores the reply was given, for inspect);
--    to (optional: the number the user wrote to, "whatsapp:+…", kept as reply_from: a
--    person's reply during a handover is sent from it); lang (optional: the language the
--    message was written in, kept as the user's last); user (the +E164, for `index`: the
--    users index of a single Redis, bot/storage/user_index.py; on a cluster the store adds it).
-- Returns {count since summary, pending pairs dropped, seq (the user's latest pair number),
--          pair stored 0/1, {names of the triggers this commit took}, context written 0/1,
--          bytes of chat_pending after this commit}.

local record = {st='done', ts=A.now, r=A.reply}
local dropped, stored, taken, bytes = 0, 0, {}, 0
if not A.touch then
  -- The user's data was just erased, this claim with it: remember only that this
  -- MessageSid was answered (no user data), so a redelivered YES is not run again.
  redis.call('HSET', K.seen, A.sid, cjson.encode(record))
  redis.call('EXPIRE', K.seen, A.window)
  return {0, 0, 0, 0, {}}
end
local owned = false
local current = decoded(redis.call('HGET', K.seen, A.sid) or 'null')
if type(current) == 'table' and current.tok == A.token and current.st == 'done' then
  -- This very commit run again (the client retried after a timeout that came after the
  -- first run): answer as the first time, writing nothing.
  return {num(K.context, 'message_count_since_summary'), 0, num(K.context, 'seq'), current.p or 0, current.d or {}}
end
owned = type(current) == 'table' and current.st == 'pending' and current.tok == A.token
if not owned then
  -- Another attempt took this MessageSid over (it records the outcome), or the user's
  -- data was erased meanwhile: write nothing at all.
  return {0, 0, 0, 0, {}}
end
local seq = num(K.context, 'seq')
local summarized = num(K.context, 'summarized_seq')
if A.pair and num(K.context, 'epoch') == A.epoch then
  local pair = A.pair
  seq = seq + 1
  pair.n = seq
  local recent = recent_of(K.context)
  table.insert(recent, pair)
  local sizes, recent_bytes = {}, 1  -- the JSON list's bytes: '[' ']' and a comma between pairs
  for j, p in ipairs(recent) do
    sizes[j] = #cjson.encode(p) + 1
    recent_bytes = recent_bytes + sizes[j]
  end
  while #recent > A.recent_max or (#recent > 1 and recent_bytes > A.recent_bytes) do
    local evicted = table.remove(recent, 1)
    recent_bytes = recent_bytes - table.remove(sizes, 1)
    if (tonumber(evicted.n) or 0) > summarized then
      redis.call('RPUSH', K.pending, cjson.encode(evicted))
    end
  end
  -- bound the pending pairs by size: drop the oldest past the limit (workers down)
  local items = redis.call('LRANGE', K.pending, 0, -1)
  for i = 1, #items do bytes = bytes + #items[i] end
  local i = 1
  while bytes > A.pending_max and i < #items do
    local gone = decoded(items[i])  -- a corrupt item is dropped like any other
    summarized = math.max(summarized, type(gone) == 'table' and tonumber(gone.n) or 0)
    bytes = bytes - #items[i]
    redis.call('LPOP', K.pending)
    dropped = dropped + 1
    i = i + 1
  end
  redis.call('HSET', K.context, 'recent_messages', encode_list(recent), 'seq', seq,
             'summarized_seq', summarized, 'message_count_since_summary', seq - summarized)
  stored = 1
  for _, rule in ipairs(A.triggers) do
    if take_if_due(K, A, rule, seq, bytes, true) then table.insert(taken, rule.name) end
  end
else
  redis.call('HSETNX', K.context, 'message_count_since_summary', 0)
end
redis.call('HSET', K.context, 'last_interaction_timestamp', A.now)
if K.index then redis.call('ZADD', K.index, A.now, A.user) end
if A.last_task then redis.call('HSET', K.context, 'last_task', A.last_task) end
if A.last_reference then redis.call('HSET', K.context, 'last_reference', A.last_reference) end
if A.to and A.to ~= '' then redis.call('HSET', K.context, 'reply_from', A.to) end
if A.lang then redis.call('HSET', K.context, 'lang', A.lang) end
if A.usage then
  for f, n in pairs(A.usage) do redis.call('HINCRBY', K.usage, f, n) end
  refresh(K.usage, A.ttl.facts)
end
record.tok, record.p = A.token, stored  -- so that a retry of this commit gets the same answer
if #taken > 0 then record.d = taken end
redis.call('HSET', K.seen, A.sid, cjson.encode(record))
-- Remember MessageSids by time: records older than the window go (a stale in-flight one
-- too); a reply is kept only for the reply window; past max_records, the oldest answered go.
local all = redis.call('HGETALL', K.seen)
local done = {}
for j = 1, #all, 2 do
  local ok, r = pcall(cjson.decode, all[j + 1])
  local age = ok and type(r) == 'table' and A.now - (tonumber(r.ts) or 0)
  if not age or age > A.window then
    redis.call('HDEL', K.seen, all[j])
  elseif r.st == 'done' then
    table.insert(done, {all[j], tonumber(r.ts) or 0, r, age})
  end
end
table.sort(done, function(a, b) return a[2] > b[2] end)
for j = 1, #done do
  local sid, r, age = done[j][1], done[j][3], done[j][4]
  if j > A.max_records then
    redis.call('HDEL', K.seen, sid)
  elseif r.r and (age > A.reply_window or j > A.replies_kept) then
    r.r = nil
    redis.call('HSET', K.seen, sid, cjson.encode(r))
  end
end
redis.call('EXPIRE', K.seen, A.window)
refresh(K.context, A.ttl.context); refresh(K.pending, A.ttl.context)
refresh(K.facts, A.ttl.facts); refresh(K.memory, A.ttl.facts); refresh(K.entities, A.ttl.facts)
refresh(K.vectors, A.ttl.facts)
refresh(K.session, A.ttl.session)
return {num(K.context, 'message_count_since_summary'), dropped, num(K.context, 'seq'), stored, taken, 1, bytes}
