-- release_trigger: free a job's trigger, so that the next stored pair can take it again,
-- if the job with this token still holds it.
-- KEYS: hash
-- A: job (the trigger's field prefix: <job>_at, <job>_token); token.
-- Returns 1 if released, 0 if another job (or nobody) held it.
if redis.call('HGET', K.hash, A.job .. '_token') == A.token then
  redis.call('HDEL', K.hash, A.job .. '_at', A.job .. '_token')
  return 1
end
return 0
