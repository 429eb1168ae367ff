-- release: delete a lock, or hand it to the live head of its fair queue, only for its holder.
--
-- KEYS[1] the lock key L; its waiter set L..':w', fair queue L..':q' and queue data
--         L..':qd' are named from it (see acquire)
-- KEYS[2] the lock's fencing counter
-- ARGV[1] token
-- ARGV[2] wake channel
-- ARGV[3] the lock's name, for the wake message
-- ARGV[4] absent for a mutex; "a" for a read/write lock's writer
--
-- Returns 1 when released (or handed over), 0 when the key did not hold this token.
-- A fencing counter that holds anything but an integer below 2^53 (see q_count in
-- the quorum prelude it is loaded after) gets no handover: the key is deleted and
-- the waiters woken, and their acquire reports the counter corrupt.
-- Publishes "h|<token>|<name>" to the new holder after a handover, or, when live
-- waiters are registered, "r|<token>|<name>" (one waiter per process re-checks) or
-- for a writer "a|<token>|<name>" (every waiter does: all the readers can go);
-- nothing otherwise.
if ARGV[4] == 'a' then
  -- a writer's intent may be left where it was refused while a majority granted
  redis.call('ZREM', KEYS[1] .. ':wi', ARGV[1])
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local W, Q, QD = KEYS[1] .. ':w', KEYS[1] .. ':q', KEYS[1] .. ':qd'
if redis.call('EXISTS', W, Q) == 0 then -- nobody waits: the common case
  redis.call('DEL', KEYS[1])
  return 1
end

local t = q_time()
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local c = q_count(2)
while c do
  local head = redis.call('LPOP', Q)
  if not head then break end
  local d = redis.call('HGET', QD, head)
  redis.call('HDEL', QD, head)
  if d then
    local exp, ttl = string.match(d, '^(%d+):(%d+)$')
    if tonumber(exp) > now then
      redis.call('SET', KEYS[1], head, 'PX', ttl)
      -- the new holder's fence, as acquire computes it (fair mode is single-master)
      local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
      redis.call('SET', KEYS[2], string.format('%d', math.max(c + 1, us)), 'PX', ttl)
      redis.call('PUBLISH', ARGV[2], 'h|' .. head .. '|' .. ARGV[3])
      return 1
    end
  end
end

redis.call('DEL', KEYS[1])
if redis.call('EXISTS', W) == 1 then
  redis.call('ZREMRANGEBYSCORE', W, '-inf', now)
  if redis.call('ZCARD', W) > 0 then
    redis.call('PUBLISH', ARGV[2], (ARGV[4] or 'r') .. '|' .. ARGV[1] .. '|' .. ARGV[3])
  end
end
return 1
