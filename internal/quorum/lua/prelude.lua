-- prelude: shared by the scripts that grant ownership and issue fencing tokens
-- on a lock master (the lock acquire, the scheduler's tick claim). It is put in
-- front of their source when they are loaded (see Script in internal/quorum).
--
-- q_time() is the server's TIME, read once per script call: the calls a
-- chunk runs in one EVALSHA (lua/many.lua) share it, as they share the
-- moment Redis freezes for key expiry while a script runs. q_memo, the
-- table it is kept in, is made by the script's first line (see Script in
-- internal/quorum), outside the function each call of a chunk runs.
--
-- q_guard(marker) returns nil when this master's marker is missing (restarted
-- empty or flushed since the client checked it: it must grant nothing), else
-- the marker's fence floor in microseconds and the moment (server ms) before
-- which this master may have lost writes: its process's start when it was
-- repaired after a restart, 0 for a brand-new deployment. The marker's value
-- is "RUNID FLOOR BORN [KIND]" (see mark.lua). It is read once per script
-- call, like TIME: no call of a chunk writes it.
--
-- q_fence(counter, quorum, t, floor, px) issues the next fencing token from a
-- counter the script has checked with q_count; t is the server's TIME. A
-- quorum counter's seed is also above the master's forgotten floor
-- (q_forgotten), read only when seeding.
--   one master: max(counter + 1, TIME in µs); the counter lives px ms (it
--     only has to outlive the lease: the clock keeps the next one above it).
--   quorum: INCR, seeded from max(TIME in µs, floor) when missing, and never
--     below the floor (a counter reloaded from an old snapshot is lifted to
--     it); the counter lives 24 h from its seeding or last write-back (INCR
--     keeps the expiry, so the hot path writes no PEXPIRE). Bounded keys: an
--     expired counter is seeded again from the clock, above every fence
--     issued before (fences grow by one per grant, far slower than a µs
--     clock). Masters that answer different values are reconciled by the
--     caller (the largest is written back to a majority).
--
-- q_int(v) is the number a counter's text v holds when it is a decimal
-- integer from 0 to 2^53 - 2 without sign or leading zeros, else nil. Lua
-- numbers are doubles: above 2^53 they are no longer exact (an INCR of
-- 9007199254740992 reads back the same), and 2^63 - 1 turns negative on the
-- way back to Redis. The bound leaves room for one more: every fence issued
-- is below 2^53 and exact.
--
-- q_count(i) reads the counter KEYS[i]: its number (0 when missing), or nil
-- and the error reply "CORRUPT i VALUE" (VALUE: the first 64 bytes it holds)
-- when it holds anything else. The client turns that reply into an error
-- naming the master and the key (quorum.CorruptError). A script checks
-- every counter it will read before its first write: a script's writes are
-- not undone by the error it returns.
local function q_int(v)
  if v == '0' then return 0 end
  if #v > 16 or not string.find(v, '^[1-9][0-9]*$') then return nil end
  local n = tonumber(v)
  if n >= 9007199254740991 then return nil end
  return n
end

local function q_count(i)
  local v = redis.pcall('GET', KEYS[i])
  if v == false then return 0 end
  if type(v) == 'string' then
    local n = q_int(v)
    if n then return n end
  else
    v = '(not a string)'
  end
  return nil, redis.error_reply('CORRUPT ' .. i .. ' ' .. string.sub(v, 1, 64))
end

-- q_counted(i, s) is q_count(i) from s, KEYS[i]'s value as an MGET read it
-- (false: missing or of another type, which only an EXISTS tells apart). A
-- script that reads a counter with other keys reads them in one MGET.
local function q_counted(i, s)
  if s == false then
    if redis.call('EXISTS', KEYS[i]) == 1 then
      return nil, redis.error_reply('CORRUPT ' .. i .. ' (not a string)')
    end
    return 0
  end
  local n = q_int(s)
  if n then return n end
  return nil, redis.error_reply('CORRUPT ' .. i .. ' ' .. string.sub(s, 1, 64))
end

-- q_raise_mark(i, v) sets the mark KEYS[i] to v (the text of a tick in
-- unix ms) unless it holds a larger one: one command when the mark moves
-- forward. A tick that no mark can hold (before 1970: q_count reads a
-- missing mark as 0) writes nothing; a mark that holds anything but an
-- integer (see q_count) is left as it was, with its expiry.
local function q_raise_mark(i, v)
  local t = q_int(v)
  if not t or t == 0 then return end
  local old = redis.pcall('SET', KEYS[i], v, 'GET', 'KEEPTTL')
  if type(old) ~= 'string' then return end -- missing (now set), or of another type (an error: nothing written)
  local n = q_int(old)
  if n and n <= t then return end
  redis.call('SET', KEYS[i], old, 'KEEPTTL') -- larger, or corrupt: put back
end

local function q_time()
  if not q_memo.time then q_memo.time = redis.call('TIME') end
  return q_memo.time
end

local function q_read_guard(marker)
  local m = redis.call('GET', marker)
  if not m then return nil end
  local floor, born = string.match(m, '^%S+ (%d+) (%d+)')
  -- a floor that is no fence is no marker (see parseMarker): repaired
  if floor and not q_int(floor) then return nil end
  return tonumber(floor) or 0, tonumber(born) or 0
end

local function q_guard(marker)
  q_memo.marker = marker
  local g = q_memo['guard ' .. marker]
  if not g then
    local floor, born = q_read_guard(marker)
    g = {floor, born}
    q_memo['guard ' .. marker] = g
  end
  return g[1], g[2]
end

-- q_floor(v) is the forgotten floor text v holds: as q_int, and also
-- 2^53 - 1, one above the largest counter (see forget.lua).
local function q_floor(v)
  if v == '9007199254740991' then return 9007199254740991 end
  return q_int(v)
end

-- q_forgotten() is the floor the master keeps for the counters forgotten on
-- it (quorum.Group.Forget, lua/forget.lua): one above the largest counter it
-- deleted, in MARKER:forgotten beside the marker q_guard read; 0 when none
-- (or when it holds no counter). A counter seeded again after a forget
-- starts above it, whatever the masters' clocks say.
local function q_forgotten()
  if not q_memo.marker then return 0 end
  local v = redis.call('GET', q_memo.marker .. ':forgotten')
  return (v and q_floor(v)) or 0
end

-- q_floor_at(k) is the forgotten floor the key k holds (see q_forgotten), 0
-- when none: for the scripts that write a fence back (fence_sync.lua,
-- raise.lua), which are given the key. A counter they find missing may
-- have been forgotten while their fence was on its way: the floor stands
-- for it, and a fence below it is not written (it would put the counter
-- back under a fence issued before the forget).
local function q_floor_at(k)
  local v = redis.call('GET', k)
  return (v and q_floor(v)) or 0
end

local function q_fence(k, quorum, t, floor, px)
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if quorum then
    local f = redis.call('INCR', k)
    local lo = floor
    if f == 1 then
      if us > lo then lo = us end
      local forgot = q_forgotten()
      if forgot > lo then lo = forgot end
    end
    if f < lo then
      f = lo
      redis.call('SET', k, string.format('%d', f), 'PX', 86400000)
    end
    return f
  end
  local old = tonumber(redis.call('SET', k, string.format('%d', us), 'PX', px, 'GET') or '0')
  if old < us then return us end
  redis.call('SET', k, string.format('%d', old + 1), 'PX', px)
  return old + 1
end

