-- usage_add: count a background job's model call, unless the user's data is gone (an erase
-- while the model was thinking must not bring a key back under the erased number).
-- KEYS: usage context memory
-- A: fields ({field = tokens}, bot/storage/usage.py); ttl (seconds; 0 = no expiry).
-- Returns 1 if counted, else 0.
if redis.call('EXISTS', K.context) == 0 and redis.call('EXISTS', K.memory) == 0 then return 0 end
for f, n in pairs(A.fields) do redis.call('HINCRBY', K.usage, f, n) end
if A.ttl > 0 then redis.call('EXPIRE', K.usage, A.ttl) end
return 1
