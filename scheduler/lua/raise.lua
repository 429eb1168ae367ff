-- raise: make a job's dispatch fencing counter at least F on one master
-- (quorum mode), after the masters that granted a claim answered different
-- counters and the claim took the largest, F. Once a majority holds F, any
-- later majority overlaps one of them and issues a larger fence.
--
-- KEYS[1] the job's dispatch fencing counter
-- KEYS[2] the master's forgotten floor (quorum.ForgottenSuffix): a counter
--         forgotten while F was on its way reads as one below the floor
--         (see q_floor_at), and F below that is not written
-- ARGV[1] F
--
-- Returns the counter after the call. Never lowers it. Fails with "CORRUPT 1
-- VALUE" (see q_count in the quorum prelude it is loaded after), writing
-- nothing, when the counter holds anything but an integer below 2^53.
local c, corrupt = q_count(1)
if corrupt then return corrupt end
local f = tonumber(ARGV[1])
if c == 0 then c = math.max(0, q_floor_at(KEYS[2]) - 1) end
if c < f then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', 86400000) -- as q_fence keeps quorum counters
  return f
end
return c
