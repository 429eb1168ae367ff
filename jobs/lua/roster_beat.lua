-- roster_beat: publish one replica in the roster and return the roster.
--
-- KEYS[1] members: replica id -> "<seen ms> <JSON>"
-- KEYS[2] lists: job list hash -> JSON job list
-- ARGV[1] replica id
-- ARGV[2] its JSON
-- ARGV[3] its job list hash
-- ARGV[4] its job list JSON, or "" (then the call answers {-1} if the list
--         is not stored, and the caller calls again with it)
-- ARGV[5] forget after, ms: members not seen for longer are removed, and
--         both keys expire this long after the last heartbeat
--
-- Returns {now ms, id, "seen json", ...}, or {-1}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 0 then
  if ARGV[4] == '' then return {-1} end
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
redis.call('HSET', KEYS[1], ARGV[1], now .. ' ' .. ARGV[2])
local forget = tonumber(ARGV[5])
local all = redis.call('HGETALL', KEYS[1])
local out, used = {now}, {}
for i = 1, #all, 2 do
  local seen = tonumber(string.match(all[i + 1], '^(%d+) '))
  if not seen or seen < now - forget then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
    local h = string.match(all[i + 1], '"hash":"([^"]*)"')
    if h then used[h] = true end
  end
end
-- lists no remaining member refers to
for _, h in ipairs(redis.call('HKEYS', KEYS[2])) do
  if not used[h] then redis.call('HDEL', KEYS[2], h) end
end
redis.call('PEXPIRE', KEYS[1], forget)
redis.call('PEXPIRE', KEYS[2], forget)
return out
