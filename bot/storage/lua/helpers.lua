-- Shared helpers, put in front of every script by bot/storage/scripts.py.

-- The recent pairs of a context hash, whatever cjson made of an empty list or a bad value.
local function recent_of(key)
  local raw = redis.call('HGET', key, 'recent_messages')
  if not raw then return {} end
  local ok, decoded = pcall(cjson.decode, raw)
  if ok and type(decoded) == 'table' then return decoded end
  return {}
end

-- A JSON list; cjson would write an empty table as {}.
local function encode_list(t)
  if #t == 0 then return '[]' end
  return cjson.encode(t)
end

-- A hash field as a number; absent or unreadable is 0.
local function num(key, fieldname)
  return tonumber(redis.call('HGET', key, fieldname) or '0') or 0
end

-- Push an existing key's expiry out to `seconds` from now (0: leave it alone).
local function refresh(key, seconds)
  if seconds > 0 and redis.call('EXISTS', key) == 1 then redis.call('EXPIRE', key, seconds) end
end
