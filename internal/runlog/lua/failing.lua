-- failing: add a runtime schedule whose run failed to the index of the
-- failing ones (the status counts it), keeping when its failures began, for
-- a schedule that still exists: a run that ends after its schedule's delete
-- does not bring it back. Any other end removes the schedule from the index
-- with a plain ZREM (runlog's noteFailing): no script.
--
-- KEYS[1] NS:{schedules}:failing  zset id -> when its failures began (ms)
-- KEYS[2] NS:{schedules}:defs     hash id -> definition (one slot with KEYS[1])
-- ARGV[1] the schedule's id
--
-- Returns 1 when the index changed, else 0.
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return 0
end
local t = redis.call('TIME')
return redis.call('ZADD', KEYS[1], 'NX', t[1] * 1000 + math.floor(t[2] / 1000), ARGV[1])
