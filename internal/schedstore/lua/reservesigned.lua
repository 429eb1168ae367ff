-- Reserves, on one lock master, the version a signed put of a runtime
-- schedule signs its definition for, at the schedule's created time
-- (MasterMarks.Reserve): granted only above every one reserved for that
-- id and created before, so that no two puts sign the same (id, created,
-- version), whichever was written.
-- KEYS[1] the signed hash ("id|created" -> version)
-- ARGV[1] "id|created", ARGV[2] the version
-- Returns {1} when reserved, else {0, the version reserved}.
local want = tonumber(ARGV[2])
if not want or not string.match(ARGV[2], '^%d+$') then
  return redis.error_reply('ERR not a version: ' .. ARGV[2])
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and string.match(cur, '^%d+$') and tonumber(cur) >= want then
  return {0, tonumber(cur)}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {1}
