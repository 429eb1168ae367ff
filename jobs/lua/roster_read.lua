-- roster_read: the roster with the queue Redis's clock, read-only.
--
-- KEYS[1] members: replica id -> "<seen ms> <JSON>"
-- KEYS[2] lists (unused; named so a Cluster routes by the same slot)
-- ARGV[1] forget after, ms: older members are left out
--
-- Returns {now ms, id, "seen json", ...}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local forget = tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
local out = {now}
for i = 1, #all, 2 do
  local seen = tonumber(string.match(all[i + 1], '^(%d+) '))
  if seen and seen >= now - forget then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
