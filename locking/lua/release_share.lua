-- release_share: give up one share (a read/write lock's reader, a fair semaphore's
-- holder), only for its holder, and wake who may now go.
--
-- KEYS[1] the lock key L; shares L..':r', waiter set L..':w', fair queue L..':q'
--         and its data L..':qd' (token -> expiry ms)
-- ARGV[1] token
-- ARGV[2] wake channel
-- ARGV[3] the lock's name, for the wake message
-- ARGV[4] "rw" a reader: when the last live reader leaves and someone waits,
--         publish "a|<token>|<name>" (every waiter re-checks: a writer can go);
--         "q" a semaphore holder: publish "h|<head>|<name>" to the live head of the
--         fair queue (dead heads are dropped)
--
-- Returns 1 when released, 0 when the share was not live (expired, or never held).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local L = KEYS[1]
local R = L .. ':r'
local s = redis.call('ZSCORE', R, ARGV[1])
if not s then return 0 end
redis.call('ZREM', R, ARGV[1])
if tonumber(s) <= now then return 0 end

if ARGV[4] == 'q' then
  local Q, QD = L .. ':q', L .. ':qd'
  while true do
    local head = redis.call('LINDEX', Q, 0)
    if not head then break end
    local d = tonumber(redis.call('HGET', QD, head) or '0')
    if d > now then
      redis.call('PUBLISH', ARGV[2], 'h|' .. head .. '|' .. ARGV[3])
      break
    end
    redis.call('LPOP', Q)
    redis.call('HDEL', QD, head)
  end
  return 1
end

redis.call('ZREMRANGEBYSCORE', R, '-inf', now)
local W = L .. ':w'
if redis.call('ZCARD', R) == 0 and redis.call('EXISTS', W) == 1 then
  redis.call('ZREMRANGEBYSCORE', W, '-inf', now)
  if redis.call('ZCARD', W) > 0 then
    redis.call('PUBLISH', ARGV[2], 'a|' .. ARGV[1] .. '|' .. ARGV[3])
  end
end
return 1
