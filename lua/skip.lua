-- skip: record ticks of a job, before they are due, as not to run, on one
-- lock master. The record is "paused", the one a claim writes for a paused
-- job's tick: a claim of any release finds it and takes the tick as
-- decided not to run, by a quorum of masters as for a pause (a tick
-- recorded so on a minority neither runs nor is refused by it).
--
-- KEYS[i] a tick J@T (scheduler.TickKey)
-- ARGV[i] its record's ttl, milliseconds (the tick's starting deadline and
--         margins after it, as a claim's record)
--
-- Returns, per tick, 1 when it holds "paused" now (written now, or
-- before), 0 when it holds another record or a claim's lease: it was
-- claimed already, and is left as it is.
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('SET', k, 'paused', 'NX', 'PX', ARGV[i]) then
    out[i] = 1
  else
    local v = redis.pcall('GET', k)
    out[i] = (v == 'paused') and 1 or 0
  end
end
return out
