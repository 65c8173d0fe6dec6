-- handover_notify: mark that the user got the handover notice; only the first caller wins,
-- so two messages arriving at once after a takeover get one notice between them.
-- KEYS: handover
-- A: none (the JSON object is empty).
-- Returns 1 for the first caller while a handover is on, else 0 (already notified, or no
-- handover: it was handed back or its TTL lapsed).
if redis.call('HGET', K.handover, 'notified') ~= '0' then return 0 end
redis.call('HSET', K.handover, 'notified', '1')
return 1
