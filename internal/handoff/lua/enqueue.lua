-- enqueue: puts tasks into one asynq queue, as asynq's own enqueue does
-- (asynq v0.26 internal/rdb: enqueueCmd), a chunk of tasks in one call.
-- A test pins the task format against asynq's reader (enqueue_test.go).
--
-- KEYS[1]   the queue's pending list, asynq:{QUEUE}:pending
-- KEYS[2..] each task's hash, asynq:{QUEUE}:t:ID (all in the queue's slot)
-- ARGV[1]   pending_since: the enqueue's time, unix nanoseconds
-- ARGV[2k], ARGV[2k+1]  task k's ID and encoded message (asynq's TaskMessage)
--
-- Returns one answer per task, in order: 1 enqueued, 0 a task with its ID is
-- in the queue already (pending, active, retrying, archived, or completed and
-- retained): asynq's "task ID conflict", which dedupes a tick. The new IDs
-- go onto the pending list with one LPUSH, in order, as one LPUSH each would.
-- Fails, writing nothing, when the pending list is not a list: tasks written
-- but not pending would dedupe the ticks' retries and never run.
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'list' and kind ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not asynq\'s pending list')
end
local out, ids = {}, {}
for k = 1, #KEYS - 1 do
  local key = KEYS[k + 1]
  if redis.call('EXISTS', key) == 1 then
    out[k] = 0
  else
    redis.call('HSET', key, 'msg', ARGV[2 * k + 1], 'state', 'pending', 'pending_since', ARGV[1])
    ids[#ids + 1] = ARGV[2 * k]
    out[k] = 1
  end
end
if #ids > 0 then redis.call('LPUSH', KEYS[1], unpack(ids)) end
return out
