-- action_take: a user's message that affirms takes the write proposed to them, once
-- (docs/tools.md, Exactly once).
-- KEYS: action
-- A: sid (the affirming message's); at (its arrival, Unix seconds).
-- Returns the action's JSON, or false: nothing is waiting, the proposal came after the
-- message, or another message took it. The same message asking again (a redone job) gets
-- it again, with its outcome once it has one, so the write goes out under the same key.
local proposal = redis.call('HGET', K.action, 'a')
if not proposal then return false end
local taken = redis.call('HGET', K.action, 'taken')
if taken and taken ~= A.sid then return false end
local e = decoded(proposal)
if type(e) ~= 'table' or e.sid == A.sid or tonumber(e.at or 0) > tonumber(A.at) then return false end
if not taken then redis.call('HSET', K.action, 'taken', A.sid) end
return {proposal, redis.call('HGET', K.action, 'done') or ''}
