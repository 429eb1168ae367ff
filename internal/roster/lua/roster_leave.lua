-- roster_leave: remove a replica from the roster, unless the entry is no
-- longer the one it wrote (a replica of the same id took its place: a config
-- reload runs the new replica beside the old one for a moment).
--
-- KEYS[1] members: replica id -> "<seen ms> <JSON>"
-- ARGV[1] replica id
-- ARGV[2] the JSON the leaving replica wrote
--
-- Returns 1 if removed, 0 if not (gone, or another's).
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local json = string.match(v, '^%d+ (.*)$')
if json ~= ARGV[2] then return 0 end
return redis.call('HDEL', KEYS[1], ARGV[1])
