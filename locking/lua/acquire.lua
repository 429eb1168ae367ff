-- acquire: take a lock on one master, or report why not.
--
-- KEYS[1] the lock key (value: the holder's token)
-- KEYS[2] the lock's fencing counter (permanent)
-- KEYS[3] the waiter set: sorted set of waiter ids scored by expiry (ms, server time)
-- KEYS[4] the fair queue: list of waiting tokens, oldest first
-- KEYS[5] the fair queue's data: hash token -> "expiry_ms:ttl_ms"
-- KEYS[6] quorum mode only: this master's marker key (absent after a restart empty)
-- ARGV[1] token (random, >= 128 bits)
-- ARGV[2] ttl in milliseconds
-- ARGV[3] mode: "s" single master (fence floor = server time in microseconds),
--         "q" quorum (plain counter; the master must carry its marker and be out of quarantine)
-- ARGV[4] waiter id, or "" when the caller will not wait
-- ARGV[5] lifetime of the waiter's entry in milliseconds
-- ARGV[6] "f" to queue fairly, "" otherwise
--
-- Returns {1, fence} owned (also when the key was handed to this token by a release),
--         {0, ms} busy, retry in ms (remaining ttl of the holder or of the queue head),
--         {-1, 0} master has no marker (restarted empty, not repaired),
--         {-2, ms} master in quarantine for ms more.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if ARGV[3] == 'q' then
  local m = redis.call('GET', KEYS[6])
  if not m then return {-1, 0} end
  local after = tonumber(m) or 0
  if after > now then return {-2, after - now} end
end

local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  -- handed over by a fair release: confirm and measure validity from this call
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if redis.call('HDEL', KEYS[5], ARGV[1]) == 1 then redis.call('LREM', KEYS[4], 1, ARGV[1]) end
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end

local wait = -1
if holder then
  wait = redis.call('PTTL', KEYS[1])
  if wait < 0 then wait = 0 end
elseif redis.call('EXISTS', KEYS[4]) == 1 then
  -- the key is free but fair waiters queue: only the live head may take it
  while true do
    local head = redis.call('LINDEX', KEYS[4], 0)
    if not head then break end
    local d = redis.call('HGET', KEYS[5], head)
    local exp = 0
    if d then exp = tonumber(string.match(d, '^(%d+)')) or 0 end
    if exp > now then
      if head ~= ARGV[1] then wait = exp - now end
      break
    end
    redis.call('LPOP', KEYS[4])
    redis.call('HDEL', KEYS[5], head)
  end
end

if wait >= 0 then
  if ARGV[4] ~= '' then
    local life = tonumber(ARGV[5])
    if ARGV[6] == 'f' then
      if redis.call('HSET', KEYS[5], ARGV[1], (now + life) .. ':' .. ARGV[2]) == 1 then
        redis.call('RPUSH', KEYS[4], ARGV[1])
      end
      if redis.call('PTTL', KEYS[4]) < life then
        redis.call('PEXPIRE', KEYS[4], life)
        redis.call('PEXPIRE', KEYS[5], life)
      end
    else
      redis.call('ZADD', KEYS[3], now + life, ARGV[4])
      if redis.call('PTTL', KEYS[3]) < life then redis.call('PEXPIRE', KEYS[3], life) end
    end
  end
  return {0, wait}
end

redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[4] ~= '' then
  redis.call('ZREM', KEYS[3], ARGV[4])
  if redis.call('HDEL', KEYS[5], ARGV[1]) == 1 then redis.call('LREM', KEYS[4], 1, ARGV[1]) end
end

local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local f
if ARGV[3] == 's' then
  f = math.max(c + 1, us)
elseif c == 0 then
  f = us -- a counter never seen (or lost) starts at server time, never at 1
else
  f = c + 1
end
redis.call('SET', KEYS[2], string.format('%d', f))
return {1, f}
