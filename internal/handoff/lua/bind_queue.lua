-- bind_queue: fix the queue a tick's task goes to, once, before it is
-- enqueued (asynq refuses a task ID twice only within one queue).
--
-- KEYS[1]   the tick's binding: NS:{job@tick}:queue
-- KEYS[2..] the tick's asynq task key in each other queue
-- ARGV[1]   this dispatcher's target: a queue name, or "" for a local run
-- ARGV[2]   the binding's ttl, ms (the task's retention: as long as its ID)
-- ARGV[3..] the other queues' names, in the order of KEYS[2..]
--
-- Returns the tick's queue ("" for local): the existing binding; else a
-- queue that already holds the task (enqueued before bindings, or by a
-- dispatcher that saw one queue only); else ARGV[1], now bound.
local b = redis.call('GET', KEYS[1])
if b then return b end
for i = 2, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('SET', KEYS[1], ARGV[i + 1], 'PX', ARGV[2])
    return ARGV[i + 1]
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]
