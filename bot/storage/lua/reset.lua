-- reset: clear the conversation; durable facts stay. The epoch moves on, so a message or
-- summary job still in flight from before the reset stores nothing after it. Creates
-- nothing for an unknown user.
-- KEYS: context pending session
-- A: ttl (seconds, for the context hash).
-- Returns 1 if there was a conversation to clear (a summary, a pair or a session fact), else 0.
local existed = redis.call('EXISTS', K.pending, K.session) > 0
  or (redis.call('HGET', K.context, 'summary') or '') ~= '' or #recent_of(K.context) > 0
existed = existed and 1 or 0
redis.call('DEL', K.pending, K.session)
if redis.call('EXISTS', K.context) == 0 then return existed end
local seq = redis.call('HGET', K.context, 'seq') or '0'
redis.call('HSET', K.context, 'summary', '', 'recent_messages', '[]', 'summarized_seq', seq,
           'message_count_since_summary', 0)
redis.call('HSET', K.context, 'epoch', num(K.context, 'epoch') + 1)  -- HINCRBY fails on a corrupt value
redis.call('HDEL', K.context, 'summary_job_at', 'summary_job_token', 'last_task')
if A.ttl > 0 then redis.call('EXPIRE', K.context, A.ttl) end
return existed
