-- Counts a scheduled tick of a job with max_runs before it is dispatched.
--
-- KEYS[1] NS:{<job>}:runs:count   ticks counted (a string integer, no expiry)
-- KEYS[2] NS:{<job>}:runs:ticks   sorted set of the counted tick IDs, by tick
--                                 (ms), trimmed to the last ARGV[4] ms
-- ARGV[1] tick ID
-- ARGV[2] tick (ms)
-- ARGV[3] max_runs
-- ARGV[4] how far back a tick may still be dispatched again (ms): the
--         job's retention; older entries are trimmed
--
-- Returns {1, count, added}: dispatch it (added 1 if this call counted it,
-- 0 if it was counted before: the same tick dispatched again, by an owner
-- that took over); or {0, count}: the job has had its max_runs ticks; or
-- {-1, value}: the count holds no decimal integer from 0 to 2^53-2 (text, a
-- fraction, a negative number, one beyond Lua's exact doubles, another
-- type; value: its first 64 bytes): corrupt, nothing is written.
local id, at = ARGV[1], tonumber(ARGV[2])
local v = redis.pcall('GET', KEYS[1])
local n = 0
if v then
  if type(v) ~= 'string' then return {-1, '(not a string)'} end
  if v ~= '0' and (#v > 16 or not string.find(v, '^[1-9][0-9]*$') or tonumber(v) >= 9007199254740991) then
    return {-1, string.sub(v, 1, 64)}
  end
  n = tonumber(v)
end
if redis.call('ZSCORE', KEYS[2], id) then
  return {1, n, 0}
end
if n >= tonumber(ARGV[3]) then return {0, n} end
n = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], at, id)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (at - tonumber(ARGV[4])))
return {1, n, 1}
