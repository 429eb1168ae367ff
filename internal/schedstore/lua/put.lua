-- Puts (creates or replaces) one runtime schedule and logs the change.
-- KEYS[1] defs hash, KEYS[2] ids zset, KEYS[3] log stream, KEYS[4] ver,
-- KEYS[5] the shard's move guard (set: baton init is moving the schedules)
-- ARGV[1] id, ARGV[2] the signed definition, ARGV[3] the log's length cap
-- ARGV[4] the version the caller read (a put only if unchanged since), or
-- "" to put whatever is there
-- Returns {ver, created ms, updated ms}, or {-1, current ver} when ARGV[4]
-- no longer matches. A put of the definition the schedule holds changes
-- nothing and returns its record's.
if redis.call('EXISTS', KEYS[5]) == 1 then
  return redis.error_reply('MOVING baton init is moving the runtime schedules to another shard count')
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local created
if cur then
  local c, u, v = string.match(cur, '^(%d+)|(%+?%d+)|(%d+)|')
  created = c
  if ARGV[4] ~= '' and ARGV[4] ~= v then
    return {-1, tonumber(v)}
  end
  -- the same definition put again changes nothing: no version, no change
  -- for the replicas to follow
  if c and string.sub(cur, #c + #u + #v + 4) == ARGV[2] then
    redis.call('ZADD', KEYS[2], 0, ARGV[1]) -- an index that lost the id has it again
    local updated = tonumber(c)
    if string.sub(u, 1, 1) == '+' then
      updated = updated + tonumber(string.sub(u, 2))
    else
      updated = tonumber(u)
    end
    return {tonumber(v), tonumber(c), updated}
  end
elseif ARGV[4] ~= '' and ARGV[4] ~= '0' then
  return {-1, 0}
end
local t = redis.call('TIME')
local now = tostring(t[1] * 1000 + math.floor(t[2] / 1000))
if not created then created = now end
local ver = redis.call('INCR', KEYS[4])
-- the head: created (unix ms), "+" and the ms from created to this put
-- (a record costs a million times its bytes), the version
-- (or this put's unix ms, where the clock went back since created)
local after = now
if tonumber(now) >= tonumber(created) then
  after = string.format('+%d', tonumber(now) - tonumber(created))
end
redis.call('HSET', KEYS[1], ARGV[1], created .. '|' .. after .. '|' .. ver .. '|' .. ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'ver', ver, 'id', ARGV[1], 'op', 'put')
return {ver, tonumber(created), tonumber(now)}
