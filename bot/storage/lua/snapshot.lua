-- snapshot: what a summary job works from, read atomically.
-- KEYS: context pending memory
-- A: cursor, job, skip (the extraction rule's fields in the memory hash: its cursor, its
--    trigger's prefix, and the field that stops it: bot/storage/triggers.py)
-- Returns {summary, summarized_seq, recent_messages JSON, chat_pending items,
--          summary_job_at, epoch, summary_job_token,
--          {extraction cursor, extraction trigger's _at, its _token, skip field}}.
return {redis.call('HGET', K.context, 'summary') or '',
        redis.call('HGET', K.context, 'summarized_seq') or '0',
        redis.call('HGET', K.context, 'recent_messages') or '[]',
        redis.call('LRANGE', K.pending, 0, -1),
        redis.call('HGET', K.context, 'summary_job_at') or '',
        redis.call('HGET', K.context, 'epoch') or '0',
        redis.call('HGET', K.context, 'summary_job_token') or '',
        redis.call('HMGET', K.memory, A.cursor, A.job .. '_at', A.job .. '_token', A.skip)}
