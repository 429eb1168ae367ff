-- Moves one runtime schedule's stored record into the shard of a new
-- layout (baton init, with every replica stopped) and logs it there as a
-- put. A record the shard holds already (an earlier init that stopped half
-- way) is kept as it is.
-- KEYS[1] defs hash, KEYS[2] ids zset, KEYS[3] log stream, KEYS[4] ver:
--         the new shard's
-- ARGV[1] id, ARGV[2] the stored value in the old shard, ARGV[3] the log's
-- length cap
-- Returns the change's version, or 0 when the shard held it already.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return 0
end
local c, u, rest = string.match(ARGV[2], '^(%d+)|(%+?%d+)|%d+|(.*)$')
if not c then
  return redis.error_reply('ERR the stored value of ' .. ARGV[1] .. ' is not a schedule record')
end
local ver = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], ARGV[1], c .. '|' .. u .. '|' .. ver .. '|' .. rest)
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'ver', ver, 'id', ARGV[1], 'op', 'put')
return ver
