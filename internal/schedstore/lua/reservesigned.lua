-- Reserves, on one lock master, the created and version a signed put of a
-- runtime schedule signs its definition for (MasterMarks.Reserve): granted
-- only above every one reserved for the id before, so that no two puts
-- sign the same (id, created, version), whichever was written.
-- KEYS[1] the shard's signed hash (id -> "created|version")
-- ARGV[1] id, ARGV[2] "created|version"
-- Returns {1} when reserved, else {0, the id's reservation}.
local function parse(s)
  if not s then return nil end
  local c, v = string.match(s, '^(%d+)|(%d+)$')
  if not c then return nil end
  return tonumber(c), tonumber(v)
end
local wc, wv = parse(ARGV[2])
if not wc then return redis.error_reply('ERR not a reservation: ' .. ARGV[2]) end
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local cc, cv = parse(cur)
if cc and (cc > wc or (cc == wc and cv >= wv)) then
  return {0, cur}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {1}
