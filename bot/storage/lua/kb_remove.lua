-- kb_remove: remove one knowledge-base document and its chunks, and move the version on.
-- KEYS: meta docs chunks vectors
-- A: id (the document's id).
-- Returns {"removed", version} or {"missing", version}.
local raw = redis.call('HGET', K.docs, A.id)
if not raw then return {'missing', redis.call('HGET', K.meta, 'version') or '0'} end
local doc = decoded(raw)
local n, size = 0, 0
if type(doc) == 'table' then n, size = tonumber(doc.chunks) or 0, tonumber(doc.bytes) or 0 end
local ids = {}
for i = 1, n do ids[i] = A.id .. '#' .. i end
for i = 1, #ids, 500 do
  local batch = {unpack(ids, i, math.min(i + 499, #ids))}
  redis.call('HDEL', K.chunks, unpack(batch))
  redis.call('HDEL', K.vectors, unpack(batch))
end
redis.call('HDEL', K.docs, A.id)
redis.call('HSET', K.meta, 'chunks', math.max(num(K.meta, 'chunks') - n, 0), 'bytes', math.max(num(K.meta, 'bytes') - size, 0))
return {'removed', tostring(redis.call('HINCRBY', K.meta, 'version', 1))}
