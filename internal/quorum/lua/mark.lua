-- mark: give a master its marker, which lets it vote (after the quarantine).
--
-- KEYS[1] the marker key (permanent)
-- ARGV[1] the marker's value as the repair read it ("" when absent): it is
--         replaced only if still the same, so concurrent repairs write once
-- ARGV[2] the run_id of the server process the repair saw ("-" when none)
-- ARGV[3] fence floor, microseconds: the highest clock the repair read on the
--         masters; the floor written is at least this server's own clock
-- ARGV[4] why it is written (the marker's KIND): "fresh" when the whole set
--         carried no marker and is treated as brand new (opted in, or marked
--         by an operator: no quarantine), "empty" when this master carried
--         none, "snapshot" when it carried another process's; "" for none
-- ARGV[5] how long before now (ms) the master may have lost writes: its uptime
--         (a lower bound) when its marker names another process (it came back
--         from a snapshot at its start), 0 when the marker is missing (lost at
--         a restart or in a flush, at the latest now). The marker records that
--         moment (BORN, server ms; 0 for a fresh deployment): the master
--         votes from BORN + the quarantine on, and claims abstain on ticks
--         due before it
--
-- Returns 1 when written, 0 when the marker changed meanwhile.
local cur = redis.call('GET', KEYS[1])
if (cur or '') ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local floor = math.max(tonumber(ARGV[3]), us)
local born = 0
if ARGV[4] ~= 'fresh' then born = math.floor(us / 1000) - tonumber(ARGV[5]) end
local v = ARGV[2] .. ' ' .. string.format('%d', floor) .. ' ' .. string.format('%d', born)
if ARGV[4] ~= '' then v = v .. ' ' .. ARGV[4] end
redis.call('SET', KEYS[1], v)
return 1
