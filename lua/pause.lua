-- pause: set a job's pause flag on one lock master, with who paused it and
-- why. The scheduler's claim reads only the flag's presence; the value is
-- for people (baton status, the dashboard).
--
-- KEYS[1] the job's pause flag (scheduler.PauseKey)
-- ARGV[1] a JSON object {"by": ..., "note": ...}: stored as data, never
--         interpreted; with "until_ms" (unix ms), the pause ends by itself
--         then: the flag expires at that instant by this master's clock
--
-- The value stored is that object with "set_ms" added, when this write was
-- made, and "at_ms", when the job was paused, both by this master's clock
-- (unix ms). A job paused already keeps the at_ms it has: pausing again
-- changes who and why (the newest set_ms among the masters tells which
-- note is current), not since when.
--
-- A flag of a newer format than ARGV[1]'s "v" (written by a newer
-- release) is left as it is: the error NEWER names its version, and only a
-- release that reads it pauses the job again.
--
-- Returns at_ms.
local v = cjson.decode(ARGV[1])
local at = nil
local old = redis.call('GET', KEYS[1])
if old then
  local ok, o = pcall(cjson.decode, old)
  if ok and type(o) == 'table' and type(o.v) == 'number' and o.v > (tonumber(v.v) or 1) then
    return redis.error_reply('NEWER the pause flag is of format ' .. tostring(o.v) .. ', newer than this replica writes (' .. tostring(v.v) .. '): pause the job again with a replica of the release that wrote it')
  end
  -- since when, if the old value says it as an exact integer (a corrupt
  -- one is replaced: this write is a new pause record)
  local a = ok and type(o) == 'table' and o.at_ms
  if type(a) == 'number' and a > 0 and a < 9007199254740992 and a == math.floor(a) then at = a end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not at then at = now end
v.at_ms = at
v.set_ms = now
local untl = tonumber(v.until_ms)
if untl ~= nil and (untl ~= math.floor(untl) or untl <= now or untl >= 9007199254740992) then
  -- an end that has passed by this master's clock (or no instant): the
  -- flag is not written, and the caller counts this master as failed
  return redis.error_reply('UNTIL the pause would end at ' .. tostring(v.until_ms) .. ' ms, not after this master\'s clock (' .. now .. ' ms)')
end
-- a new write replaces the old end, or its absence (SET drops the TTL)
redis.call('SET', KEYS[1], cjson.encode(v))
if untl ~= nil then redis.call('PEXPIREAT', KEYS[1], untl) end
return at
