-- claim: take a MessageSid for processing and load everything the reply needs, in one trip.
-- KEYS: context seen facts session memory pending
-- A: sid; now (Unix seconds); lease (seconds a claim stays in flight before a redelivery
--    may take it over); token (proves ownership at commit); ttl (seconds, for chat_seen).
-- Returns {status ('new', 'duplicate' or 'inflight'), the context hash, the reply or false,
--          facts, session facts, memory (flat hashes, 'new' only), pending pairs (only for
--          a duplicate whose reply lives in its stored pair)}.
local rec = redis.call('HGET', K.seen, A.sid)
if rec then
  local r = cjson.decode(rec)
  if r.st == 'done' then
    local older = {}
    if not r.r and r.pair then older = redis.call('LRANGE', K.pending, 0, -1) end
    return {'duplicate', redis.call('HGETALL', K.context), r.r or false, {}, {}, {}, older}
  end
  if A.now - tonumber(r.ts) < A.lease then
    return {'inflight', {}, false, {}, {}, {}, {}}
  end
end
redis.call('HSET', K.seen, A.sid, cjson.encode({st='pending', ts=A.now, tok=A.token}))
if A.ttl > 0 then redis.call('EXPIRE', K.seen, A.ttl) end
return {'new', redis.call('HGETALL', K.context), false,
        redis.call('HGETALL', K.facts), redis.call('HGETALL', K.session), redis.call('HGETALL', K.memory), {}}
