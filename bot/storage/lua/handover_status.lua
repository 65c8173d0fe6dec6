-- handover_status: record Twilio's delivery status on the person's message with this sid.
-- Status callbacks may arrive out of order ("delivered" after "read"): a status never
-- replaces a later one; "failed" and "undelivered" are final.
-- KEYS: log
-- A: sid (the Messages API's SM…); status (sent, delivered, read, failed, undelivered);
--    code (Twilio's ErrorCode, e.g. 63016; absent when none); rank ({status = order}).
-- Returns 1 if an entry was updated, else 0 (no such sid, or a later status is there).
local items = redis.call('LRANGE', K.log, 0, -1)
for i = #items, 1, -1 do
  local entry = decoded(items[i])
  if type(entry) == 'table' and entry.sid == A.sid then
    local old, new = A.rank[entry.st or ''] or 0, A.rank[A.status] or 0
    if new < old or (old == new and entry.st == A.status) then return 0 end
    entry.st = A.status
    if A.code then entry.code = A.code end
    redis.call('LSET', K.log, i - 1, cjson.encode(entry))
    return 1
  end
end
return 0
