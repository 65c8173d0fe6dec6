-- retrigger: when a job has finished, take its trigger again if pairs that arrived while it
-- ran make it due now (they found the trigger held, so no commit queued a job for them).
-- KEYS: context pending memory
-- A: rule (one TriggerRule with the token the next job will hold, see commit.lua);
--    now (Unix seconds); job_lease (seconds a job holds its trigger).
-- Returns 1 if the trigger was taken (queue the job), else 0.
if redis.call('EXISTS', K.context) == 0 then return 0 end
local seq = num(K.context, 'seq')
local bytes = 0
for _, item in ipairs(redis.call('LRANGE', K.pending, 0, -1)) do bytes = bytes + #item end
if take_if_due(K, A, A.rule, seq, bytes, false) then return 1 end
return 0
