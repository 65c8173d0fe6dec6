-- kb_snapshot: read the whole knowledge base at one version, for an index to be built from.
-- KEYS: meta docs chunks vectors
-- A: vectors (true to include the chunk vectors).
-- Returns {version, docs (flat HGETALL), chunks (flat HGETALL), vectors (flat HGETALL or {})}.
local vectors = {}
if A.vectors then vectors = redis.call('HGETALL', K.vectors) end
return {redis.call('HGET', K.meta, 'version') or '0', redis.call('HGETALL', K.docs),
        redis.call('HGETALL', K.chunks), vectors}
