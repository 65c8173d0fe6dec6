-- take_trigger: take a job's trigger unconditionally (a topic shift queues its summary now);
-- a job queued before holds a stale token, and its result will be discarded. With `held`,
-- only if that token holds it now (a waiting job handing its trigger to its next look; an
-- erase or a takeover meanwhile wins).
-- With `lease`, only if no job holds it inside that many seconds (a job starting the next).
-- KEYS: hash
-- A: job (the trigger's field prefix: <job>_at, <job>_token); now; token; held (optional);
--    lease (optional).
-- Returns 1 if taken, else 0.
if A.held and redis.call('HGET', K.hash, A.job .. '_token') ~= A.held then return 0 end
if A.lease and redis.call('HGET', K.hash, A.job .. '_token')
   and A.now - num(K.hash, A.job .. '_at') <= A.lease then return 0 end
redis.call('HSET', K.hash, A.job .. '_at', A.now, A.job .. '_token', A.token)
return 1
