-- extend_share: push one share's expiry out (a read/write lock's reader, a fair
-- semaphore's holder), only while it is live.
--
-- KEYS[1] the lock key L; the shares are the sorted set L..':r' (token -> expiry ms)
-- ARGV[1] token
-- ARGV[2] ttl in milliseconds
--
-- Returns 1 when the share was live and now expires ttl from now, 0 otherwise. An
-- expired share is never revived: its place may have been given to another.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local R = KEYS[1] .. ':r'
local s = redis.call('ZSCORE', R, ARGV[1])
if not s then return 0 end
if tonumber(s) <= now then
  redis.call('ZREM', R, ARGV[1])
  return 0
end
local ttl = tonumber(ARGV[2])
redis.call('ZADD', R, now + ttl, ARGV[1])
if redis.call('PTTL', R) < ttl then redis.call('PEXPIRE', R, ttl) end
return 1
