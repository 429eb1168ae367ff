-- Puts back one runtime schedule as a replica held it before the queue
-- Redis went back (restarted empty, or from an older snapshot), or deletes
-- again one the replica had seen deleted, and logs the change; or, with no
-- id, claims the shard's restore for the replica's copy.
-- KEYS[1] defs hash, KEYS[2] ids zset, KEYS[3] log stream, KEYS[4] ver,
-- KEYS[5] the shard's move guard (set: baton init is moving the schedules),
-- KEYS[6] the shard's restores: hash id -> "seen|ver" (the copy's version
--         of the restore that wrote the schedule, and the change it made),
--         id -> "c|ver" (a caller deleted it since a restore began: delete.lua),
--         and "*seen": the highest version of a copy that claimed the shard
-- ARGV[1] id ("": claim), ARGV[2] the signed definition ("": delete it again),
-- ARGV[3] the log's length cap, ARGV[4] the version of the record the
-- replica found in the store (0: none), ARGV[5] the version of the shard
-- the replica's copy held (seen), ARGV[6] the record's head as the copy
-- held it: "created|updated" (its times are kept), ARGV[7] the shard's
-- version when the replica read the store
-- A claim returns 1, and raises the shard's version to seen (changes made
-- from now on are newer than anything a claiming copy saw, before the loss
-- or after an earlier one), when no copy that saw more claimed the shard;
-- else 0: that copy's restore stands.
-- A restore returns 1 when put back or deleted again (or nothing to
-- delete); 0 when a copy that saw more claimed the shard, or the schedule
-- changed since the replica read it, other than by a restore from a copy
-- that had seen less (a newer copy wins over an older one, whichever
-- restores first).
if redis.call('EXISTS', KEYS[5]) == 1 then
  return redis.error_reply('MOVING baton init is moving the runtime schedules to another shard count')
end
local seen = tonumber(ARGV[5])
local mark = tonumber(redis.call('HGET', KEYS[6], '*seen') or '0')
if mark > seen then return 0 end
if ARGV[1] == '' then
  if mark < seen then redis.call('HSET', KEYS[6], '*seen', ARGV[5]) end
  local v = tonumber(redis.call('GET', KEYS[4]) or '0')
  if v < seen then redis.call('SET', KEYS[4], ARGV[5]) end
  redis.call('PEXPIRE', KEYS[6], 86400000)
  return 1
end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local curVer = '0'
if cur then
  curVer = string.match(cur, '^%d+|%+?%d+|(%d+)|') or '?'
end
-- the record as a restore left it: from a copy that saw as much as this
-- one or more, it stands; from one that saw less, this one writes over it
local byRestore, older = false, false
local r = redis.call('HGET', KEYS[6], ARGV[1])
if r then
  local by, ver = string.match(r, '^(%w+)|(%d+)$')
  if by == 'c' then
    -- a caller deleted it after the replica read the store
    if tonumber(ver) > tonumber(ARGV[7]) then return 0 end
  elseif by and ver == curVer then
    byRestore = true
    older = tonumber(by) < seen
  end
end
if byRestore and not older then return 0 end
if curVer ~= ARGV[4] and not byRestore then return 0 end
if ARGV[2] == '' and not cur then
  return 1
end
local ver = redis.call('INCR', KEYS[4])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  log_delete(KEYS[3], ARGV[3], cur, 'ver', ver, 'id', ARGV[1], 'op', 'del', 'restore', ARGV[5]) -- logdelete.lua
  redis.call('HSET', KEYS[6], ARGV[1], ARGV[5] .. '|0')
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[6] .. '|' .. ver .. '|' .. ARGV[2])
  redis.call('ZADD', KEYS[2], 0, ARGV[1])
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'ver', ver, 'id', ARGV[1], 'op', 'put', 'restore', ARGV[5])
  redis.call('HSET', KEYS[6], ARGV[1], ARGV[5] .. '|' .. ver)
end
-- the restores are kept a day: long enough for every replica's copy to
-- have restored or read them
redis.call('PEXPIRE', KEYS[6], 86400000)
return 1
