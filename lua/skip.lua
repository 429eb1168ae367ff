-- skip: record ticks of a job, before they are due, as not to run, on one
-- lock master. The record is "paused", the one a claim writes for a paused
-- job's tick: a claim of any release finds it and takes the tick as
-- decided not to run, by a quorum of masters as for a pause (a tick
-- recorded so on a minority neither runs nor is refused by it). Beside it
-- a key J@T:skip says it was skipped (who and why): a resume's catch-up,
-- which replays ticks recorded paused, leaves those out.
--
-- KEYS[2i-1] tick i, J@T (scheduler.TickKey)
-- KEYS[2i]   its skip key, J@T:skip
-- KEYS[2n+1] the job's skipped ticks, a sorted set of their unix ms (a
--            runtime schedule's delete takes its skips with it)
-- ARGV[i]    tick i's record's ttl, milliseconds (the tick's starting
--            deadline and margins after it, as a claim's record)
-- ARGV[n+1]  what the skip key holds: who skipped it and why
-- ARGV[n+1+i] tick i, unix ms
--
-- Returns, per tick, 1 when it holds "paused" now (written now, or
-- before), 0 when it holds another record or a claim's lease: it was
-- claimed already, and is left as it is (and no skip key is written).
local n = (#KEYS - 1) / 2
local out = {}
local longest = 0
for i = 1, n do
  local k, sk = KEYS[2 * i - 1], KEYS[2 * i]
  local ok = redis.call('SET', k, 'paused', 'NX', 'PX', ARGV[i])
  if not ok then
    local v = redis.pcall('GET', k)
    ok = (v == 'paused')
  end
  if ok then
    redis.call('SET', sk, ARGV[n + 1], 'PX', ARGV[i])
    redis.call('ZADD', KEYS[2 * n + 1], ARGV[n + 1 + i], ARGV[n + 1 + i])
    if tonumber(ARGV[i]) > longest then longest = tonumber(ARGV[i]) end
    out[i] = 1
  else
    out[i] = 0
  end
end
if longest > 0 and redis.call('PTTL', KEYS[2 * n + 1]) < longest then
  redis.call('PEXPIRE', KEYS[2 * n + 1], longest)
end
return out
