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
log_delete(KEYS[3], ARGV[2], cur, 'ver', ver, 'id', ARGV[1], 'op', 'del') -- logdelete.lua
if KEYS[6] and redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('HSET', KEYS[6], ARGV[1], 'c|' .. ver)
end
return ver
