-- acquire: take a lock on one master, or report why not. Loaded after the
-- quorum prelude (q_guard, q_fence: internal/quorum/lua/prelude.lua).
--
-- KEYS[1] the lock key L (value: the holder's token). Its companions share its hash
--         tag and are named from it: L..':w' the waiter set (sorted set of waiter ids
--         scored by expiry, ms server time), L..':q' the fair queue (list of tokens,
--         oldest first), L..':qd' the fair queue's data (hash token -> "expiry_ms:ttl_ms").
-- KEYS[2] the lock's fencing counter
-- KEYS[3] this master's marker key (modes "q" and "s"; absent in mode "u")
-- ARGV[1] token (random, >= 128 bits)
-- ARGV[2] ttl in milliseconds
-- ARGV[3] mode: "q" one of a quorum, "s" a single master, "u" a single master
--         whose restarts are not tracked (a Cluster: no marker). See q_fence.
-- ARGV[4] waiter id of a caller that will wait, "" for one that will not
-- ARGV[5] how long the waiter's entry must outlive the wait it is told, milliseconds:
--         it lives until the waiter's next attempt and a little more
-- ARGV[6] "f" for a fair caller (respects and, when waiting, joins the FIFO).
--         A lock name is used either fairly or not: non-fair callers ignore the queue.
--
-- Returns {1, fence} owned (also when a release handed the key to this token),
--         {0, ms} busy, retry in ms (remaining ttl of the holder or of the queue head),
--         {-1, 0} the master's marker is missing (restarted or flushed since the
--                 client checked it): it grants nothing until repaired.
-- Fails with "CORRUPT 2 VALUE" (see q_count), writing nothing, when the fencing
-- counter holds anything but an integer below 2^53, and on one master with
-- "CORRUPT 3 (not a string)" when the marker is a key of another type.
local t = q_time()
local mode = ARGV[3]
local floor = 0
if mode == 'q' then
  floor = q_guard(KEYS[3])
  if not floor then return {-1, 0} end
end
local corrupt, _
if mode == 's' then
  -- one master: its clock is the fence floor; the marker need only exist.
  -- It is read with the fencing counter in one MGET, which reads a key of
  -- another type as missing: a marker that is there is then reported
  local got = redis.call('MGET', KEYS[3], KEYS[2])
  if not got[1] then
    if redis.call('EXISTS', KEYS[3]) == 1 then return redis.error_reply('CORRUPT 3 (not a string)') end
    return {-1, 0}
  end
  _, corrupt = q_counted(2, got[2])
else
  _, corrupt = q_count(2)
end
if corrupt then return corrupt end
local quorum = mode == 'q'
local waiter = ARGV[4]
local fair = ARGV[6] == 'f'
local W, Q, QD = KEYS[1] .. ':w', KEYS[1] .. ':q', KEYS[1] .. ':qd'
local function fence() return q_fence(KEYS[2], quorum, t, floor, ARGV[2]) end

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
    -- handed over by a fair release (or our own earlier attempt whose answer
    -- was lost): confirm, and measure validity from this call
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    if redis.call('HDEL', QD, ARGV[1]) == 1 then redis.call('LREM', Q, 1, ARGV[1]) end
    redis.call('ZREM', W, ARGV[1])
    local f = q_count(2)
    if f == 0 then f = fence() end
    return {1, f}
  end
  wait = redis.call('PTTL', KEYS[1])
  if wait < 0 then wait = 0 end
end

if wait >= 0 then
  -- a fair waiter re-checks, and refreshes its place, at least every ttl: one that
  -- died leaves the queue within its ttl and ARGV[5]
  if fair and wait > tonumber(ARGV[2]) then wait = tonumber(ARGV[2]) end
  if waiter ~= '' then
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local life = wait + tonumber(ARGV[5])
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
