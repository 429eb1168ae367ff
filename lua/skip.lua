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
-- ARGV[i]    its record's ttl, milliseconds (the tick's starting deadline
--            and margins after it, as a claim's record)
-- ARGV[n+1]  what the skip key holds: who skipped it and why
--
-- Returns, per tick, 1 when it holds "paused" now (written now, or
-- before), 0 when it holds another record or a claim's lease: it was
-- claimed already, and is left as it is (and no skip key is written).
local n = #KEYS / 2
local out = {}
for i = 1, n do
  local k, sk = KEYS[2 * i - 1], KEYS[2 * i]
  local ok = redis.call('SET', k, 'paused', 'NX', 'PX', ARGV[i])
  if not ok then
    local v = redis.pcall('GET', k)
    ok = (v == 'paused')
  end
  if ok then
    redis.call('SET', sk, ARGV[n + 1], 'PX', ARGV[i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
