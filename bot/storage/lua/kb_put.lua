-- kb_put: add or replace one knowledge-base document and its chunks, all or nothing.
-- The caps are checked against the totals as they would be after the change; past one,
-- nothing is written. The same content (sha256, both models, title and language) is a no-op.
-- KEYS: meta docs chunks vectors
-- A: id (the document's id); doc (its record, JSON text); sha (of the source bytes);
--    model ("<embedding model>|<gate model>", each "" for none); title; language ("" for none);
--    chunks (list of chunk JSON texts, in order);
--    vectors (list of texts, one per chunk: "<model>|<base64 float32>", one per model, joined by
--    spaces; absent without embeddings);
--    bytes (what the record, chunks and vectors take); max_chunks; max_bytes.
-- Returns {status, value}: {"stored", version}, {"unchanged", version},
-- {"too_many_chunks", total after}, {"too_many_bytes", total after}.
local old_chunks, old_bytes = 0, 0
local old_raw = redis.call('HGET', K.docs, A.id)
if old_raw then
  local old = decoded(old_raw)
  if type(old) == 'table' then
    local language = old.language
    if language == nil or language == cjson.null then language = '' end
    local models = (old.embedding_model or '') .. '|' .. (old.gate_model or '')
    if old.sha256 == A.sha and models == A.model and old.title == A.title
        and language == A.language then
      return {'unchanged', redis.call('HGET', K.meta, 'version') or '0'}
    end
    old_chunks, old_bytes = tonumber(old.chunks) or 0, tonumber(old.bytes) or 0
  end
end
local chunks = num(K.meta, 'chunks') - old_chunks + #A.chunks
local bytes = num(K.meta, 'bytes') - old_bytes + A.bytes
if chunks > A.max_chunks then return {'too_many_chunks', tostring(chunks)} end
if bytes > A.max_bytes then return {'too_many_bytes', tostring(bytes)} end
local function in_batches(cmd, key, fields)
  for i = 1, #fields, 500 do
    redis.call(cmd, key, unpack(fields, i, math.min(i + 499, #fields)))
  end
end
local stale = {}
for i = 1, old_chunks do stale[i] = A.id .. '#' .. i end
if #stale > 0 then
  in_batches('HDEL', K.chunks, stale)
  in_batches('HDEL', K.vectors, stale)
end
local fresh, vecs = {}, {}
for i, chunk in ipairs(A.chunks) do
  table.insert(fresh, A.id .. '#' .. i)
  table.insert(fresh, chunk)
  if A.vectors then
    table.insert(vecs, A.id .. '#' .. i)
    table.insert(vecs, A.vectors[i])
  end
end
if #fresh > 0 then in_batches('HSET', K.chunks, fresh) end
if #vecs > 0 then in_batches('HSET', K.vectors, vecs) end
redis.call('HSET', K.docs, A.id, A.doc)
redis.call('HSET', K.meta, 'chunks', chunks, 'bytes', bytes)
return {'stored', tostring(redis.call('HINCRBY', K.meta, 'version', 1))}
