-- rate: count one more message of the user in the current window (a fixed window that opens
-- with the first message and lasts A.window seconds).
-- KEYS: rate
-- A: window (seconds).
-- Returns the number of messages in the window, this one included.
local n = redis.call('INCR', K.rate)
if n == 1 or redis.call('TTL', K.rate) < 0 then redis.call('EXPIRE', K.rate, A.window) end
return n
