-- defer_push: queue a message to be answered by a worker (docs/deferred.md), behind the
-- user's other deferred messages, and say whether a runner must be started for the user.
-- KEYS: queue run seen
-- A: sid; entry (the stored message: '0' then its JSON, which holds "sid"); token (the
--    runner's, if this call starts one); lease (seconds a runner holds the user without
--    news); ttl (seconds the queue lives without news).
-- Returns {'known', ''} for a MessageSid already queued or already claimed (a redelivery:
--         nothing new starts), {'start', token} when no runner held the user (start a job
--         with this token), or {'queued', the runner's token}.
if redis.call('HEXISTS', K.seen, A.sid) == 1 then return {'known', ''} end
for _, raw in ipairs(redis.call('LRANGE', K.queue, 0, -1)) do
  local e = decoded(string.sub(raw, 2))
  if type(e) == 'table' and e.sid == A.sid then return {'known', ''} end
end
redis.call('RPUSH', K.queue, A.entry)
redis.call('EXPIRE', K.queue, A.ttl)
if redis.call('SET', K.run, A.token, 'NX', 'EX', A.lease) then return {'start', A.token} end
return {'queued', redis.call('GET', K.run) or ''}
