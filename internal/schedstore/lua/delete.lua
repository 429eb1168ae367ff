-- Deletes one runtime schedule and logs the change.
-- KEYS[1] defs hash, KEYS[2] ids zset, KEYS[3] log stream, KEYS[4] ver,
-- KEYS[5] the shard's move guard (set: baton init is moving the schedules),
-- KEYS[6] the shard's restores (restore.lua): while replicas restore the
-- shard (a day after a claim), the delete is recorded there, so that no
-- restore that read the store before it puts the schedule back
-- ARGV[1] id, ARGV[2] the log's length cap
-- Returns the change's version, or 0 when there was no such schedule.
if redis.call('EXISTS', KEYS[5]) == 1 then
  return redis.error_reply('MOVING baton init is moving the runtime schedules to another shard count')
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local ver = redis.call('INCR', KEYS[4])
-- logged no earlier than the deleted schedule's created (a record put
-- back by a restore, or created before Redis's clock went back, may be
-- later than the stream's last entry): a schedule put again after it is
-- created later (put.lua), so an ETag of this one does not match it
local at = '*'
local c = tonumber(string.match(cur, '^(%d+)|') or '')
if c then
  local t = redis.call('TIME')
  local top = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
  local ms = math.max(t[1] * 1000 + math.floor(t[2] / 1000), top and tonumber(string.match(top[1], '^(%d+)')) or 0)
  if c > ms then at = string.format('%d-*', c) end
end
local added = redis.pcall('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], at, 'ver', ver, 'id', ARGV[1], 'op', 'del')
if type(added) == 'table' and added.err then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*', 'ver', ver, 'id', ARGV[1], 'op', 'del')
end
if KEYS[6] and redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('HSET', KEYS[6], ARGV[1], 'c|' .. ver)
end
return ver
