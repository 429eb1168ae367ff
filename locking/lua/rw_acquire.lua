-- rw_acquire: take a read/write lock's read share or its write lock on one master,
-- or report why not. Loaded after the quorum prelude (q_guard, q_fence).
--
-- KEYS[1] the lock key L: the writer's token while write-held. Its companions share
--         its hash tag: L..':r' the readers (sorted set of tokens scored by expiry, ms
--         server time), L..':wi' the waiting writers' intents (tokens scored by
--         expiry), L..':w' the waiter set of the wake-ups (as acquire's).
-- KEYS[2] the lock's fencing counter (readers and writers draw from it)
-- KEYS[3] this master's marker key (modes "q" and "s"; absent in mode "u")
-- ARGV[1] token
-- ARGV[2] ttl in milliseconds
-- ARGV[3] mode, as acquire's
-- ARGV[4] waiter id of a caller that will wait, "" for one that will not
-- ARGV[5] how long a waiter's entries outlive the wait it was told, ms (the time
--         its next attempt may take to arrive)
-- ARGV[6] "r" a read share, "w" the write lock
--
-- Write-preferring: a live intent of a waiting writer keeps new readers out, and
-- expires (ARGV[5] after the wait it was told, which is never more than its own ttl)
-- unless the writer keeps trying, so a writer that died waiting holds readers up for
-- at most its ttl and ARGV[5], however long the holders it waited for hold on. Expired readers and intents are
-- dropped by every call: a reader that died frees its share at its own expiry.
--
-- Returns {1, fence} owned, {0, ms} busy (retry in ms), {-1, 0} marker missing.
-- Fails with "CORRUPT 2 VALUE" (see q_count), writing nothing, when the fencing
-- counter holds anything but an integer below 2^53.
local t = q_time()
local mode = ARGV[3]
local floor = 0
if mode == 'q' then
  floor = q_guard(KEYS[3])
  if not floor then return {-1, 0} end
elseif mode == 's' then
  if redis.call('EXISTS', KEYS[3]) == 0 then return {-1, 0} end
end
local _, corrupt = q_count(2)
if corrupt then return corrupt end
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local L, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local R, WI, W = L .. ':r', L .. ':wi', L .. ':w'
redis.call('ZREMRANGEBYSCORE', R, '-inf', now)
redis.call('ZREMRANGEBYSCORE', WI, '-inf', now)

local function keep(k, ms) -- k lives at least ms more
  if redis.call('PTTL', k) < ms then redis.call('PEXPIRE', k, ms) end
end
local function busy(wait, intent)
  if wait < 1 then wait = 1 end
  if wait > ttl then wait = ttl end -- re-check, and refresh the entries, at least every ttl
  if ARGV[4] ~= '' then
    local life = wait + tonumber(ARGV[5])
    redis.call('ZADD', W, now + life, ARGV[4])
    keep(W, life)
    if intent then
      redis.call('ZADD', WI, now + life, token)
      keep(WI, life)
    end
  end
  return {0, wait}
end
local function owned(fresh)
  redis.call('ZREM', W, token)
  redis.call('ZREM', WI, token)
  if not fresh then
    local f = q_count(2)
    if f > 0 then return {1, f} end
  end
  return {1, q_fence(KEYS[2], mode == 'q', t, floor, ARGV[2])}
end
-- the latest expiry in a sorted set, as a wait from now
local function last(k)
  local e = redis.call('ZRANGE', k, -1, -1, 'WITHSCORES')
  return tonumber(e[2]) - now
end

if ARGV[6] == 'r' then
  if redis.call('ZSCORE', R, token) then -- our own earlier attempt, its answer lost
    redis.call('ZADD', R, now + ttl, token)
    keep(R, ttl)
    return owned(false)
  end
  local w = redis.call('PTTL', L)
  if w > 0 then return busy(w, false) end
  if redis.call('ZCARD', WI) > 0 then
    local e = redis.call('ZRANGE', WI, 0, 0, 'WITHSCORES') -- the first intent to lapse
    return busy(tonumber(e[2]) - now, false)
  end
  redis.call('ZADD', R, now + ttl, token)
  keep(R, ttl)
  return owned(true)
end

local h = redis.call('GET', L)
if h == token then
  redis.call('PEXPIRE', L, ttl)
  return owned(false)
end
if h then return busy(redis.call('PTTL', L), true) end
if redis.call('ZCARD', R) > 0 then return busy(last(R), true) end
redis.call('SET', L, token, 'PX', ttl)
return owned(true)
