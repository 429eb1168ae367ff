-- Deletes one runtime schedule and logs the change.
-- KEYS[1] defs hash, KEYS[2] ids zset, KEYS[3] log stream, KEYS[4] ver,
-- KEYS[5] the shard's move guard (set: baton init is moving the schedules),
-- KEYS[6] the shard's restores (restore.lua): while replicas restore the
-- shard (a day after a claim), the delete is recorded there, so that no
-- restore that read the store before it puts the schedule back (a
-- delete that finds none is logged and recorded then too: the store may
-- have lost it, and a restore would put it back)
-- ARGV[1] id, ARGV[2] the log's length cap
-- ARGV[3] the schedule's version the caller read (a delete only if still
-- at it), or "" to delete whatever is there; ARGV[4] its created ms the
-- caller read, or ""
-- Returns {change, created ms}: the change's version and the deleted
-- schedule's created (0 for a value readers cannot read), or {0} when
-- there was no such schedule; or {-1, current version} (0: none; -1: a value readers cannot
-- read) when ARGV[3] or ARGV[4] does not match.
if redis.call('EXISTS', KEYS[5]) == 1 then
  return redis.error_reply('MOVING baton init is moving the runtime schedules to another shard count')
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local conditional = (ARGV[3] or '') ~= '' or (ARGV[4] or '') ~= ''
local restoring = KEYS[6] and redis.call('EXISTS', KEYS[6]) == 1
if not cur then
  if conditional then return {-1, 0} end
  if restoring then
    -- the store may have lost it, and a restore put it back: the delete
    -- is logged (a restore that reads the store after it leaves it, as
    -- one changed since) and recorded (one that read it before does not
    -- write it), so that it stands as a delete that found it does
    local ver = redis.call('INCR', KEYS[4])
    log_delete(KEYS[3], ARGV[2], '', 'ver', ver, 'id', ARGV[1], 'op', 'del') -- logdelete.lua
    redis.call('HSET', KEYS[6], ARGV[1], 'c|' .. ver)
  end
  return {0}
end
if conditional then
  local c, _, _, own, def = read_record(cur) -- record.lua
  if not def then return {-1, -1} end
  if not record_matches(own, c, ARGV[3] or '', ARGV[4] or '') then return {-1, own} end
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
local ver = redis.call('INCR', KEYS[4])
log_delete(KEYS[3], ARGV[2], cur, 'ver', ver, 'id', ARGV[1], 'op', 'del') -- logdelete.lua
if restoring then
  redis.call('HSET', KEYS[6], ARGV[1], 'c|' .. ver)
end
return {ver, tonumber(string.match(cur, '^(%d+)|') or '0')}
