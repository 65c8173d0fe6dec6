-- take_trigger: take a job's trigger unconditionally (a topic shift queues its summary now);
-- a job queued before holds a stale token, and its result will be discarded.
-- KEYS: hash
-- A: job (the trigger's field prefix: <job>_at, <job>_token); now; token.
redis.call('HSET', K.hash, A.job .. '_at', A.now, A.job .. '_token', A.token)
return 1
