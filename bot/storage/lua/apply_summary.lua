-- apply_summary: store a new summary covering the pairs up to `upto`, and drop those pairs.
-- KEYS: context pending
-- A: token (the job's; it must still hold the summary trigger); epoch (the one it read: no
--    reset since); upto (last pair number folded in); summary (the new text);
--    clear_upto (at a topic shift: pairs up to it leave the recent window; those above
--    upto, not folded in yet, wait in chat_pending for the next summary);
--    ttl (seconds).
-- Returns {applied 0/1, count since summary, reason ('applied', 'superseded' or 'reset')}.
if redis.call('HGET', K.context, 'summary_job_token') ~= A.token then
  return {0, num(K.context, 'message_count_since_summary'), 'superseded'}
end
redis.call('HDEL', K.context, 'summary_job_at', 'summary_job_token')
if num(K.context, 'epoch') ~= A.epoch then
  return {0, num(K.context, 'message_count_since_summary'), 'reset'}
end
while true do
  local head = redis.call('LINDEX', K.pending, 0)
  if not head then break end
  local pair = decoded(head)  -- a corrupt head is removed: it can never be summarized
  local n = type(pair) == 'table' and tonumber(pair.n) or 0
  if n > A.upto then break end
  redis.call('LPOP', K.pending)
end
-- pairs dropped for size while the job ran may have moved summarized_seq past upto
local summarized = math.max(num(K.context, 'summarized_seq'), A.upto)
if A.clear_upto then
  local kept = {}
  for _, p in ipairs(recent_of(K.context)) do
    local n = tonumber(p.n) or 0
    if n > A.clear_upto then
      table.insert(kept, p)
    elseif n > summarized then
      -- newer than every pending pair (they left the window first): the list stays in order
      redis.call('RPUSH', K.pending, cjson.encode(p))
    end
  end
  redis.call('HSET', K.context, 'recent_messages', encode_list(kept))
end
local count = num(K.context, 'seq') - summarized
redis.call('HSET', K.context, 'summary', A.summary, 'summarized_seq', summarized,
           'message_count_since_summary', count)
refresh(K.context, A.ttl); refresh(K.pending, A.ttl)
return {1, count, 'applied'}
