-- action_drop: the user answered a proposal with something other than a yes: drop it,
-- unless a message has already taken it, or the message came before the proposal (it
-- cannot be an answer to it) (docs/tools.md).
-- KEYS: action
-- A: at (the message's arrival, Unix seconds).
-- Returns the dropped proposal's JSON, or false when none was waiting.
if redis.call('HEXISTS', K.action, 'taken') == 1 then return false end
local proposal = redis.call('HGET', K.action, 'a')
if not proposal then return false end
local e = decoded(proposal)
if type(e) == 'table' and tonumber(e.at or 0) > tonumber(A.at) then return false end
redis.call('DEL', K.action)
return proposal
