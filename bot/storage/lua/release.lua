-- release: forget an unfinished claim, so that a redelivery processes the message afresh.
-- KEYS: seen
-- A: sid; token (the claim's; another attempt's claim is left alone).
local rec = redis.call('HGET', K.seen, A.sid)
if rec then
  local r = decoded(rec)
  if type(r) ~= 'table' or (r.st == 'pending' and r.tok == A.token) then redis.call('HDEL', K.seen, A.sid) end
end
return 1
