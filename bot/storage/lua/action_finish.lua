-- action_finish: record what a confirmed write came to, for a job redone for the same
-- message (docs/tools.md, Exactly once).
-- KEYS: action
-- A: sid (the confirming message's); outcome (JSON text).
-- Returns 1 when recorded, 0 when the proposal is gone or another message took it.
if redis.call('HGET', K.action, 'taken') ~= A.sid then return 0 end
redis.call('HSET', K.action, 'done', A.outcome)
return 1
