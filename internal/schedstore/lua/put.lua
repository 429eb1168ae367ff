-- Puts (creates or replaces) one runtime schedule and logs the change.
-- KEYS[1] defs hash, KEYS[2] ids zset, KEYS[3] log stream, KEYS[4] ver,
-- KEYS[5] the shard's move guard (set: baton init is moving the schedules)
-- ARGV[1] id, ARGV[2] the signed definition, ARGV[3] the log's length cap
-- ARGV[4] the schedule's own version the caller read (a put only if still
-- at it; "0": only if there is none), or "" to put whatever is there
-- ARGV[5] the schedule's created ms the caller read (with ARGV[4]: a put
-- only over that schedule, not one deleted and put again since), or ""
-- ARGV[6], ARGV[7]: the created ms and version the definition is signed
-- for (Store.boundDomain), or "" (not bound): the record is written with
-- them, when they follow what is stored: the same created and a higher
-- version, or a created after the shard's last change (a new schedule,
-- or one over a value put back or not signed); else returns {-2}. ARGV[4]
-- "-1" with them: only over a value that is not a record, or none.
-- Returns {change, created ms, updated ms, version}, or {-1, current
-- version} when ARGV[4] or ARGV[5] no longer matches ({-1, -1}: the stored
-- value is not a record, which no condition matches). A put of the
-- definition the schedule holds changes nothing and returns its record's.
-- The stored value: created (unix ms: this put's, or a ms after the
-- shard's last change when that is later), "+" and the ms from created to this
-- put (a record costs a million times its bytes; this put's unix ms where
-- the clock went back since created), the shard's change that put it, the
-- schedule's own version (counts its changes; a value without it is at 1),
-- and the definition, joined by "|".
if redis.call('EXISTS', KEYS[5]) == 1 then
  return redis.error_reply('MOVING baton init is moving the runtime schedules to another shard count')
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local created
local own = 0
if cur then
  local c, u, v, o, def = read_record(cur) -- record.lua
  own = o
  if not def then
    -- not a record readers can read: no version or created of it was
    -- read, so no condition matches it; a put without one replaces it
    -- with a new schedule
    if (ARGV[4] ~= '' and ARGV[4] ~= '-1') or ARGV[5] ~= '' then
      return {-1, -1}
    end
    own = 0
  else
    created = c
    if ARGV[4] == '-1' or not record_matches(own, c, ARGV[4], ARGV[5]) then
      return {-1, own}
    end
    -- the same definition put again changes nothing: no version, no change
    -- for the replicas to follow
    if def == ARGV[2] then
      redis.call('ZADD', KEYS[2], 0, ARGV[1]) -- an index that lost the id has it again
      local updated = tonumber(c)
      if string.sub(u, 1, 1) == '+' then
        updated = updated + tonumber(string.sub(u, 2))
      else
        updated = tonumber(u)
      end
      return {tonumber(v), tonumber(c), updated, own}
    end
  end
elseif (ARGV[4] ~= '' and ARGV[4] ~= '0') or ARGV[5] ~= '' then
  return {-1, 0}
end
local t = redis.call('TIME')
local now = tostring(t[1] * 1000 + math.floor(t[2] / 1000))
-- a new schedule is created after the shard's last change (its stream's
-- last entry; delete.lua logs a delete no earlier than the deleted
-- schedule's created): one deleted and put again in the same ms, or after
-- Redis's clock went back, has another created than the one deleted,
-- which an ETag told apart
local function last_change_ms()
  local top = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
  return top and tonumber(string.match(top[1], '^(%d+)'))
end
if (ARGV[6] or '') ~= '' then
  local bc, bo = tonumber(ARGV[6]), tonumber(ARGV[7])
  if created and tonumber(created) == bc then
    if not bo or bo <= own then return {-2} end
  else
    local ms = last_change_ms()
    if not bc or not bo or bo < 1 or (ms and bc <= ms) then return {-2} end
  end
  created, own = ARGV[6], bo - 1
elseif not created then
  local ms = last_change_ms()
  if ms and tonumber(now) <= ms then now = string.format('%d', ms + 1) end
  created = now
end
local ver = redis.call('INCR', KEYS[4])
own = own + 1
local after = now
if tonumber(now) >= tonumber(created) then
  after = string.format('+%d', tonumber(now) - tonumber(created))
end
redis.call('HSET', KEYS[1], ARGV[1], created .. '|' .. after .. '|' .. ver .. '|' .. own .. '|' .. ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'ver', ver, 'id', ARGV[1], 'op', 'put')
return {ver, tonumber(created), tonumber(now), own}
