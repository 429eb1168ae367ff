-- pause: set a job's pause flag on one lock master, with who paused it and
-- why. The scheduler's claim reads only the flag's presence; the value is
-- for people (baton status, the dashboard).
--
-- KEYS[1] the job's pause flag (scheduler.PauseKey)
-- ARGV[1] a JSON object {"by": ..., "note": ...}: stored as data, never
--         interpreted
--
-- The value stored is that object with "set_ms" added, when this write was
-- made, and "at_ms", when the job was paused, both by this master's clock
-- (unix ms). A job paused already keeps the at_ms it has: pausing again
-- changes who and why (the newest set_ms among the masters tells which
-- note is current), not since when.
--
-- Returns at_ms.
local v = cjson.decode(ARGV[1])
local at = nil
local old = redis.call('GET', KEYS[1])
if old then
  local ok, o = pcall(cjson.decode, old)
  if ok and type(o) == 'table' and tonumber(o.at_ms) then at = tonumber(o.at_ms) end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not at then at = now end
v.at_ms = at
v.set_ms = now
redis.call('SET', KEYS[1], cjson.encode(v))
return at
