-- The buffer of a buffering job (concurrency buffer_one, buffer_all): the
-- ticks that found the job running and wait for it, oldest first.
--
-- KEYS[1] NS:{exec:<job>}:buffer        sorted set: tick ID -> tick (ms)
-- KEYS[2] NS:{exec:<job>}:buffer:alive  hash: tick ID -> liveness deadline
--                                       (ms, Redis TIME)
-- KEYS[3] NS:{exec:<job>}:buffer:next   the kept tick the lease is being
--                                       handed to (its ID), set when the
--                                       lease is given up while ticks wait
-- ARGV[1] op: "join", "rejoin", "beat", "rank", "leave", "first" or
--         "mark_next"
-- ARGV[2] tick ID
-- ARGV[3] tick (ms)
-- ARGV[4] liveness ttl (ms): a waiter that does not beat for this long is
--         dropped from the buffer (its worker died)
-- ARGV[5] bound (join and first): most ticks kept
--
-- Every op first drops the entries whose waiter stopped beating.
--
-- join:  the tick's rank (0: next to run) after adding it, -1 if the buffer
--        is full (the tick is dropped), or its rank if it was there already
--        (a retry of a kept tick keeps its place, beyond the bound too). The
--        tick the lease is being handed to does not count towards the
--        bound: it is as good as running (a tick that comes in the instant
--        between a run's end and its successor's start is kept, not
--        dropped).
-- rejoin: join for a waiter whose entry was dropped while it stalled (it
--        missed its beats) and that still waits: back in its place by its
--        tick, beyond the bound if need be (it was kept; the bound was
--        applied when it came). Its rank.
-- beat:  1 and the deadline renewed, or 0: the entry is gone.
-- rank:  the tick's rank, or -1 if it is not kept.
-- leave: removes the tick; 1 if it was kept.
-- first: for a run of the tick that took the job: how many kept ticks are
--        older. When none, it runs now: its own entry (if kept) and any
--        next mark are removed. Otherwise it must not overtake them:
--        the caller gives the lease back, which goes to the oldest (marked
--        so), and the tick is kept behind them at once, as join would (its
--        own join then finds it kept, or full).
-- mark_next: the run holding the lease is about to give it up: the
--        oldest kept tick, if any, is marked as the one it goes to. 1 if
--        there is one.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[4])
local op, id = ARGV[1], ARGV[2]

local alive = redis.call('HGETALL', KEYS[2])
local live = 0
for i = 1, #alive, 2 do
  if tonumber(alive[i + 1]) < now then
    redis.call('HDEL', KEYS[2], alive[i])
    redis.call('ZREM', KEYS[1], alive[i])
  else
    live = live + 1
  end
end
-- an entry without a liveness deadline cannot be judged: dropped
if redis.call('ZCARD', KEYS[1]) ~= live then
  for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    if redis.call('HEXISTS', KEYS[2], m) == 0 then redis.call('ZREM', KEYS[1], m) end
  end
end

local function keep()
  -- both keys outlive every waiter's deadline, and vanish once nobody waits
  redis.call('PEXPIRE', KEYS[1], 2 * ttl)
  redis.call('PEXPIRE', KEYS[2], 2 * ttl)
end

-- the oldest kept tick is the one the lease goes to next
local function mark_next()
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not oldest then return 0 end
  redis.call('SET', KEYS[3], oldest, 'PX', 2 * ttl)
  return 1
end

-- a tick no longer kept is no longer the one handed the lease
local function gone(m)
  if redis.call('GET', KEYS[3]) == m then redis.call('DEL', KEYS[3]) end
end

-- puts the tick in the buffer (bounded: unless it is full) and returns its
-- rank, or -1 when it is full; a tick already kept keeps its place
local function admit(bounded)
  local r = redis.call('ZRANK', KEYS[1], id)
  if not r then
    local kept = redis.call('ZCARD', KEYS[1])
    local handed = redis.call('GET', KEYS[3])
    if handed and redis.call('ZSCORE', KEYS[1], handed) then kept = kept - 1 end
    if bounded and kept >= tonumber(ARGV[5]) then return -1 end
    redis.call('ZADD', KEYS[1], ARGV[3], id)
    r = redis.call('ZRANK', KEYS[1], id)
  end
  redis.call('HSET', KEYS[2], id, now + ttl)
  keep()
  return r
end

if op == 'join' or op == 'rejoin' then
  return admit(op == 'join')
elseif op == 'beat' then
  if not redis.call('ZSCORE', KEYS[1], id) then return 0 end
  redis.call('HSET', KEYS[2], id, now + ttl)
  keep()
  return 1
elseif op == 'rank' then
  local r = redis.call('ZRANK', KEYS[1], id)
  if not r then return -1 end
  return r
elseif op == 'leave' then
  gone(id)
  redis.call('HDEL', KEYS[2], id)
  return redis.call('ZREM', KEYS[1], id)
elseif op == 'first' then
  local older = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. ARGV[3])
  if older == 0 then
    -- this tick runs: whichever tick the next mark named, it is not running
    redis.call('DEL', KEYS[3])
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZREM', KEYS[1], id)
  else
    -- the lease goes back to the oldest, and this tick keeps its place
    -- behind it now (or is turned away by the bound when its own join
    -- comes), before a newer one can take it
    mark_next()
    admit(true)
  end
  return older
elseif op == 'mark_next' then
  return mark_next()
end
return redis.error_reply('buffer.lua: unknown op ' .. tostring(op))
