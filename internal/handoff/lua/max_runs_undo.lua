-- Takes back the count of a tick whose dispatch failed (max_runs.lua's
-- keys); the tick may be counted again when it is dispatched.
--
-- ARGV[1] tick ID
-- Returns 1 if the tick was counted and is no longer.
if redis.call('ZREM', KEYS[2], ARGV[1]) == 1 then
  redis.call('DECR', KEYS[1])
  return 1
end
return 0
