-- acquire: take a lock on one master, or report why not.
--
-- KEYS[1] the lock key L (value: the holder's token). Its companions share its hash
--         tag and are named from it: L..':w' the waiter set (sorted set of waiter ids
--         scored by expiry, ms server time), L..':q' the fair queue (list of tokens,
--         oldest first), L..':qd' the fair queue's data (hash token -> "expiry_ms:ttl_ms").
-- KEYS[2] the lock's fencing counter
-- KEYS[3] quorum mode only: this master's marker key (absent after a restart empty)
-- ARGV[1] token (random, >= 128 bits)
-- ARGV[2] ttl in milliseconds
-- ARGV[3] mode: "s" single master: fence = max(counter + 1, server time in µs); the
--         counter only has to outlive the lock, so it expires with it.
--         "q" quorum: permanent counter, incremented; the master must carry its marker
--         and be out of quarantine.
-- ARGV[4] optional: waiter id of a caller that will wait (absent: it will not)
-- ARGV[5] optional: lifetime of the waiter's entry in milliseconds
-- ARGV[6] optional: "f" for a fair caller (respects and joins the FIFO). A lock name
--         is used either fairly or not: non-fair callers ignore the queue.
--
-- Returns {1, fence} owned (also when a release handed the key to this token),
--         {0, ms} busy, retry in ms (remaining ttl of the holder or of the queue head),
--         {-1, 0} master has no marker (restarted empty, not repaired),
--         {-2, ms} master in quarantine for ms more.
local t = redis.call('TIME')
local quorum = ARGV[3] == 'q'
local waiter = ARGV[4] or ''
local W, Q, QD = KEYS[1] .. ':w', KEYS[1] .. ':q', KEYS[1] .. ':qd'

if quorum then
  local m = redis.call('GET', KEYS[3])
  if not m then return {-1, 0} end
  local after = tonumber(m) or 0
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if after > now then return {-2, after - now} end
end

local function fence()
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if quorum then
    local f = redis.call('INCR', KEYS[2])
    if f == 1 then -- never seen (or lost): start from server time, never at 1
      f = us
      redis.call('SET', KEYS[2], string.format('%d', f))
    end
    return f
  end
  local old = tonumber(redis.call('SET', KEYS[2], string.format('%d', us), 'PX', ARGV[2], 'GET') or '0')
  if old < us then return us end
  redis.call('SET', KEYS[2], string.format('%d', old + 1), 'PX', ARGV[2])
  return old + 1
end

local fair = ARGV[6] == 'f'
local wait = -1
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if fair and redis.call('EXISTS', Q) == 1 then
    -- the key was free but fair waiters queue: only the live head may take it
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    while true do
      local head = redis.call('LINDEX', Q, 0)
      if not head then break end
      local d = redis.call('HGET', QD, head)
      local exp = 0
      if d then exp = tonumber(string.match(d, '^(%d+)')) or 0 end
      if exp > now then
        if head ~= ARGV[1] then
          redis.call('DEL', KEYS[1])
          wait = exp - now
        end
        break
      end
      redis.call('LPOP', Q)
      redis.call('HDEL', QD, head)
    end
  end
else
  if redis.call('GET', KEYS[1]) == ARGV[1] then
    -- handed over by a fair release: confirm, and measure validity from this call
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    if redis.call('HDEL', QD, ARGV[1]) == 1 then redis.call('LREM', Q, 1, ARGV[1]) end
    local f = tonumber(redis.call('GET', KEYS[2]) or '0')
    if f == 0 then f = fence() end
    return {1, f}
  end
  wait = redis.call('PTTL', KEYS[1])
  if wait < 0 then wait = 0 end
end

if wait >= 0 then
  if waiter ~= '' then
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local life = tonumber(ARGV[5])
    if fair then
      if redis.call('HSET', QD, ARGV[1], (now + life) .. ':' .. ARGV[2]) == 1 then
        redis.call('RPUSH', Q, ARGV[1])
      end
      if redis.call('PTTL', Q) < life then
        redis.call('PEXPIRE', Q, life)
        redis.call('PEXPIRE', QD, life)
      end
    else
      redis.call('ZADD', W, now + life, waiter)
      if redis.call('PTTL', W) < life then redis.call('PEXPIRE', W, life) end
    end
  end
  return {0, wait}
end

if waiter ~= '' then
  redis.call('ZREM', W, waiter)
  if fair and redis.call('HDEL', QD, ARGV[1]) == 1 then redis.call('LREM', Q, 1, ARGV[1]) end
end
return {1, fence()}
