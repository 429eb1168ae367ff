-- roster_beat: publish one replica in the roster and return the roster.
--
-- KEYS[1] members: replica id -> "<seen ms> <JSON>"
-- KEYS[2] lists: job list hash -> JSON job list
-- KEYS[3] clock: exists while the queue Redis's clock is taken to have
--         stepped (no liveness verdict, nothing forgotten)
-- ARGV[1] replica id
-- ARGV[2] its JSON
-- ARGV[3] its job list hash
-- ARGV[4] its job list JSON, or "" (then the call answers {-1} if the list
--         is not stored, and the caller calls again with it)
-- ARGV[5] forget after, ms: members not seen for longer are removed
-- ARGV[6] the earliest TIME the caller expects, ms, by its monotonic clock
--         since its previous reading; 0: no expectation
-- ARGV[7] the latest TIME it expects, ms; 0: no expectation (then nothing
--         is forgotten: a clock stepped forward would forget everyone)
-- ARGV[8] how long a step suspends verdicts, ms: TIME outside
--         [ARGV[6], ARGV[7]] sets KEYS[3] for this long
-- ARGV[9] keep, ms: all three keys expire this long after the last heartbeat
--
-- Returns {now ms, suspended (0 or 1), id, "seen json", ...}, or {-1}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('HEXISTS', KEYS[2], ARGV[3]) == 0 then
  if ARGV[4] == '' then return {-1} end
  redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
end
local lo, hi = tonumber(ARGV[6]), tonumber(ARGV[7])
if lo > 0 and (now < lo or now > hi) then
  redis.call('SET', KEYS[3], now, 'PX', ARGV[8])
end
local suspended = redis.call('EXISTS', KEYS[3])
redis.call('HSET', KEYS[1], ARGV[1], now .. ' ' .. ARGV[2])
-- forgotten: members older than forget by the earlier of TIME and the
-- caller's expectation (a clock stepped forward forgets no one)
local before = 0
if suspended == 0 and hi > 0 then before = math.min(now, hi) - tonumber(ARGV[5]) end
local all = redis.call('HGETALL', KEYS[1])
local out, used = {now, suspended}, {}
for i = 1, #all, 2 do
  local seen = tonumber(string.match(all[i + 1], '^(%d+) '))
  if not seen or seen < before then
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
redis.call('PEXPIRE', KEYS[1], ARGV[9])
redis.call('PEXPIRE', KEYS[2], ARGV[9])
return out
