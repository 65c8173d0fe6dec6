-- Shared helpers, put in front of every script by bot/storage/scripts.py.

-- The recent pairs of a context hash, whatever cjson made of an empty list or a bad value.
local function recent_of(key)
  local raw = redis.call('HGET', key, 'recent_messages')
  if not raw then return {} end
  local ok, decoded = pcall(cjson.decode, raw)
  if not ok or type(decoded) ~= 'table' then return {} end
  local pairs_only = {}  -- a corrupt element (not an object) is dropped, never indexed
  for _, p in ipairs(decoded) do
    if type(p) == 'table' then table.insert(pairs_only, p) end
  end
  return pairs_only
end

-- A JSON list; cjson would write an empty table as {}.
local function encode_list(t)
  if #t == 0 then return '[]' end
  return cjson.encode(t)
end

-- A JSON value, or nil when it is not readable JSON (a corrupt value must not fail every call).
local function decoded(raw)
  local ok, value = pcall(cjson.decode, raw)
  if ok then return value end
  return nil
end

-- A hash field as a number; absent or unreadable is 0.
local function num(key, fieldname)
  return tonumber(redis.call('HGET', key, fieldname) or '0') or 0
end

-- Push an existing key's expiry out to `seconds` from now (0: leave it alone).
local function refresh(key, seconds)
  if seconds > 0 and redis.call('EXISTS', key) == 1 then redis.call('EXPIRE', key, seconds) end
end

-- Take a job's trigger when the job is due (bot/storage/triggers.py): `every` unread pairs
-- past its cursor, or chat_pending past `early_bytes`; never while another job holds the
-- trigger inside A.job_lease. While `skip_field` is '1' (the user opted out), pairs are never
-- to be read: the cursor moves on. `just_stored`: pair `seq` was stored this instant, so a
-- cursor at or past it counts an earlier conversation that expired (the user is back after
-- its TTL, but memory lives longer): numbering restarted, and every stored pair is unread.
local function take_if_due(K, A, rule, seq, pending_bytes, just_stored)
  local hash = K[rule.hash]
  if rule.skip_field and redis.call('HGET', hash, rule.skip_field) == '1' then
    redis.call('HSET', hash, rule.cursor, seq)
    return false
  end
  local cursor = num(hash, rule.cursor)
  if cursor > seq or (just_stored and cursor == seq) then
    cursor = 0
    redis.call('HSET', hash, rule.cursor, 0)
  end
  local unread = seq - cursor
  local due = (rule.every > 0 and unread >= rule.every)
    or (rule.early_bytes > 0 and pending_bytes >= rule.early_bytes)
  if not due or A.now - num(hash, rule.job .. '_at') <= A.job_lease then return false end
  redis.call('HSET', hash, rule.job .. '_at', A.now, rule.job .. '_token', rule.token)
  return true
end
