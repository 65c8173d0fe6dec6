-- defer_mark: just before a deferred reply is posted, mark its message as being sent, so a
-- runner that died after the post does not send it twice (docs/deferred.md).
-- KEYS: queue run
-- A: sid; token (the runner's).
-- Returns 'ok' (send it), 'sent' (a runner before this one got this far: do not send
-- again), 'gone' (the message is no longer queued: erased) or 'lost' (another runner, or
-- none after an erase, holds the user).
if redis.call('GET', K.run) ~= A.token then return 'lost' end
local head = redis.call('LINDEX', K.queue, 0)
if not head then return 'gone' end
local e = decoded(string.sub(head, 2))
if type(e) ~= 'table' or e.sid ~= A.sid then return 'gone' end
if string.sub(head, 1, 1) == '1' then return 'sent' end
redis.call('LSET', K.queue, 0, '1' .. string.sub(head, 2))
return 'ok'
