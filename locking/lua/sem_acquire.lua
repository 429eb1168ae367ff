-- sem_acquire: take one of a fair semaphore's places on its one master, first come
-- first served, or report why not. Loaded after the quorum prelude (q_guard,
-- q_fence); a fair semaphore lives on a single master (modes "s" and "u").
--
-- KEYS[1] the semaphore's key L (no value of its own). Companions: L..':r' the
--         holders (sorted set of tokens scored by expiry, ms server time), L..':q'
--         the queue (tokens, oldest first), L..':qd' the queue's data (hash
--         token -> expiry ms of the waiter's place).
-- KEYS[2] the semaphore's fencing counter
-- KEYS[3] this master's marker key (mode "s"; absent in mode "u")
-- ARGV[1] token
-- ARGV[2] ttl in milliseconds
-- ARGV[3] mode
-- ARGV[4] waiter id ("" for a caller that will not wait: it takes a place only
--         when one is free and nobody queues, and never queues)
-- ARGV[5] how long a waiter's place outlives the wait it was told, ms
-- ARGV[6] the limit: at most this many live holders (each caller's own: a lowered
--         limit lets holders above it stay until they release)
-- ARGV[7] wake channel
-- ARGV[8] the semaphore's name, for the wake message
--
-- Returns {1, fence} holding, {0, ms} full or not our turn (retry in ms), {-1, 0}
-- marker missing. Fails with "CORRUPT 2 VALUE" (see q_count), writing nothing,
-- when the fencing counter holds anything but an integer below 2^53. A grant that leaves places free publishes "h|<next>|<name>" to
-- the next in line, which need not wait for a release.
local t = q_time()
local mode = ARGV[3]
if mode == 's' and redis.call('EXISTS', KEYS[3]) == 0 then return {-1, 0} end
local _, corrupt = q_count(2)
if corrupt then return corrupt end
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local L, token, ttl, limit = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[6])
local R, Q, QD = L .. ':r', L .. ':q', L .. ':qd'
redis.call('ZREMRANGEBYSCORE', R, '-inf', now)

local function keep(k, ms)
  if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
end
if redis.call('ZSCORE', R, token) then -- our own earlier attempt, its answer lost
  redis.call('ZADD', R, now + ttl, token)
  keep(R, ttl)
  local f = q_count(2)
  if f == 0 then f = q_fence(KEYS[2], false, t, 0, ARGV[2]) end
  return {1, f}
end

-- the live head of the queue, dropping those that stopped waiting
local head
while true do
  head = redis.call('LINDEX', Q, 0)
  if not head then break end
  if tonumber(redis.call('HGET', QD, head) or '0') > now then break end
  redis.call('LPOP', Q)
  redis.call('HDEL', QD, head)
end

local n = redis.call('ZCARD', R)
if n < limit and (not head or head == token) then
  redis.call('ZADD', R, now + ttl, token)
  keep(R, ttl)
  if head then
    redis.call('LPOP', Q)
    redis.call('HDEL', QD, token)
  end
  local f = q_fence(KEYS[2], false, t, 0, ARGV[2])
  if n + 1 < limit then -- places are left: wake the next in line
    local nxt = redis.call('LINDEX', Q, 0)
    if nxt then redis.call('PUBLISH', ARGV[7], 'h|' .. nxt .. '|' .. ARGV[8]) end
  end
  return {1, f}
end

local wait
if n >= limit then
  local e = redis.call('ZRANGE', R, 0, 0, 'WITHSCORES') -- the first holder to lapse
  wait = tonumber(e[2]) - now
else
  wait = tonumber(redis.call('HGET', QD, head)) - now -- the head's place lapses
end
if wait < 1 then wait = 1 end
if wait > ttl then wait = ttl end -- re-check, and refresh the place, at least every ttl:
-- a waiter that died leaves the queue within its ttl and ARGV[5]
if ARGV[4] ~= '' then
  local life = wait + tonumber(ARGV[5])
  if redis.call('HSET', QD, token, now + life) == 1 then redis.call('RPUSH', Q, token) end
  keep(Q, life)
  keep(QD, life)
end
return {0, wait}
