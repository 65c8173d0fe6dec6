-- claim: take a MessageSid for processing and load everything the reply needs, in one trip.
-- KEYS: context seen facts session memory vectors
-- A: sid; now (Unix seconds); lease (seconds a claim stays in flight before a redelivery
--    may take it over); token (proves ownership at commit); window (seconds a MessageSid
--    is remembered: chat_seen's TTL); reply_window (seconds a redelivery still gets the
--    first reply, in full).
-- Returns {status ('new', 'duplicate' or 'inflight'), the context hash ('new' only), the
--          reply or false, facts (the packed string, or the hash of a user stored before it),
--          session facts, memory (flat hashes, 'new' only), seconds since the first attempt
--          (duplicates), or -1, the facts' vectors of a user stored before the packed string
--          (flat hash, 'new' only)}.
local rec = redis.call('HGET', K.seen, A.sid)
if rec then
  local r = decoded(rec)
  if type(r) == 'table' then
    local age = A.now - (tonumber(r.ts) or 0)
    if r.st == 'done' then
      local reply = false
      if r.r and age <= A.reply_window then reply = r.r end
      return {'duplicate', {}, reply, {}, {}, {}, tostring(age), {}}
    end
    -- The same token is this very claim run again (the client retried after a timeout that
    -- came after the first run): answer as the first time.
    if age < A.lease and r.tok ~= A.token then
      return {'inflight', {}, false, {}, {}, {}, tostring(age), {}}
    end
  end
end
redis.call('HSET', K.seen, A.sid, cjson.encode({st='pending', ts=A.now, tok=A.token}))
redis.call('EXPIRE', K.seen, A.window)
local facts
if redis.call('TYPE', K.facts).ok == 'string' then facts = redis.call('GET', K.facts)
else facts = redis.call('HGETALL', K.facts) end
return {'new', redis.call('HGETALL', K.context), false, facts, redis.call('HGETALL', K.session), redis.call('HGETALL', K.memory), '-1',
        redis.call('HGETALL', K.vectors)}
