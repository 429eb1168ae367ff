-- unpause before: delete a job's pause flag on one lock master if it was
-- written (its set_ms, lua/pause.lua) no later than a time by this
-- master's clock: a runtime schedule's delete takes the pause written
-- before it, not one of a schedule put again under the id and paused once
-- it was deleted.
--
-- KEYS[1] the job's pause flag (scheduler.PauseKey)
-- ARGV[1] unix ms by this master's clock, read before the delete
--
-- Returns 1 when no pause is left (deleted, or none), 0 when one written
-- after ARGV[1] is kept. A value without a set_ms (corrupt) is deleted.
local v = redis.call('GET', KEYS[1])
if not v then return 1 end
local ok, o = pcall(cjson.decode, v)
local set = ok and type(o) == 'table' and tonumber(o.set_ms)
if set and set > tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
return 1
