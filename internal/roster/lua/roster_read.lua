-- roster_read: the roster with the queue Redis's clock, read-only but for
-- recording a clock step the caller's expectation reveals.
--
-- KEYS[1] members: replica id -> "<seen ms> <JSON>"
-- KEYS[2] lists (unused; named so a Cluster routes by the same slot)
-- KEYS[3] clock: exists while the queue Redis's clock is taken to have
--         stepped (no liveness verdict, nothing left out)
-- ARGV[1] forget after, ms: older members are left out (older than the
--         newest heartbeat by this much, at most)
-- ARGV[2] the earliest TIME the caller expects, ms; 0: no expectation
-- ARGV[3] the latest TIME it expects, ms; 0: no expectation
-- ARGV[4] how long a step suspends verdicts, ms: TIME outside
--         [ARGV[2], ARGV[3]] sets KEYS[3] for this long
--
-- Returns {now ms, suspended (0 or 1), id, "seen json", ...}.
-- An entry without a seen time is returned too, for the caller to report
-- (a heartbeat deletes it).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lo, hi = tonumber(ARGV[2]), tonumber(ARGV[3])
if lo > 0 and (now < lo or now > hi) then
  redis.call('SET', KEYS[3], now, 'PX', ARGV[4])
end
local suspended = redis.call('EXISTS', KEYS[3])
local all = redis.call('HGETALL', KEYS[1])
-- left out: members older than forget by the earliest of TIME, the caller's
-- expectation and the newest heartbeat (a clock stepped forward leaves no
-- one out before a heartbeat has seen the step)
local before = 0
if suspended == 0 then
  local ref = now
  if hi > 0 then ref = math.min(ref, hi) end
  local newest = 0
  for i = 2, #all, 2 do
    newest = math.max(newest, tonumber(string.match(all[i], '^(%d+) ')) or 0)
  end
  if newest > 0 then ref = math.min(ref, newest) end
  before = ref - tonumber(ARGV[1])
end
local out = {now, suspended}
for i = 1, #all, 2 do
  local seen = tonumber(string.match(all[i + 1], '^(%d+) '))
  if not seen or seen >= before then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
