-- fence_sync: raise a master's fencing counter to the fence a quorum agreed on,
-- only while this token holds the lock there.
--
-- KEYS[1] the lock key
-- KEYS[2] the lock's fencing counter
-- ARGV[1] token
-- ARGV[2] fence (decimal integer)
-- ARGV[3] "s" when the token holds a share (KEYS[1]..':r', see rw_acquire), not the key
-- KEYS[3] the master's forgotten floor (quorum.ForgottenSuffix; see q_floor_at)
--
-- Returns 1 when the counter now equals the fence, 0 when the lock is not held by
-- this token, -1 when the counter is already above the fence. Fails with
-- "CORRUPT 2 VALUE" (see q_count, in the quorum prelude it is loaded after),
-- writing nothing, when the counter holds anything but an integer below 2^53.
if ARGV[3] == 's' then
  if not redis.call('ZSCORE', KEYS[1] .. ':r', ARGV[1]) then return 0 end
elseif redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local c, corrupt = q_count(2)
if corrupt then return corrupt end
local f = tonumber(ARGV[2])
if c > f then return -1 end
if c == 0 and q_floor_at(KEYS[3]) > f + 1 then return -1 end -- forgotten meanwhile, above it
redis.call('SET', KEYS[2], ARGV[2], 'PX', 86400000) -- as q_fence keeps quorum counters
return 1
