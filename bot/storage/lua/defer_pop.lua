-- defer_pop: a deferred message is answered; take it off the queue and say whether the
-- runner has more to do. With no sid, only the second part (the runner's last look).
-- KEYS: queue run
-- A: sid (optional); token (the runner's); lease (seconds the runner holds the user).
-- Returns 'more' (the runner goes on, its hold renewed), 'idle' (nothing left: the hold is
-- given up, so the next deferred message starts a runner) or 'lost' (not this runner's).
if redis.call('GET', K.run) ~= A.token then return 'lost' end
if A.sid then
  local head = redis.call('LINDEX', K.queue, 0)
  local e = head and decoded(string.sub(head, 2))
  if type(e) == 'table' and e.sid == A.sid then redis.call('LPOP', K.queue) end
end
if redis.call('LLEN', K.queue) == 0 then
  redis.call('DEL', K.run)
  return 'idle'
end
redis.call('EXPIRE', K.run, A.lease)
return 'more'
