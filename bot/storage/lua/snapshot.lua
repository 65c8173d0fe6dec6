-- snapshot: what a summary job works from, read atomically.
-- KEYS: context pending
-- A: (none)
-- Returns {summary, summarized_seq, recent_messages JSON, chat_pending items,
--          summary_job_at, epoch, summary_job_token}.
return {redis.call('HGET', K.context, 'summary') or '',
        redis.call('HGET', K.context, 'summarized_seq') or '0',
        redis.call('HGET', K.context, 'recent_messages') or '[]',
        redis.call('LRANGE', K.pending, 0, -1),
        redis.call('HGET', K.context, 'summary_job_at') or '',
        redis.call('HGET', K.context, 'epoch') or '0',
        redis.call('HGET', K.context, 'summary_job_token') or ''}
