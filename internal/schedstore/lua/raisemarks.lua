-- Raises the marks of one shard of the runtime schedules (MasterMarks) on
-- one lock master: each id's mark is set where it is below the one given
-- (Mark.below) or is not a mark.
-- KEYS[1] the shard's marks hash (id -> "created|version", "|d" deleted)
-- ARGV pairs: id, mark
local function parse(s)
  if not s then return nil end
  local c, v, d = string.match(s, '^(%d+)|(%d+)(.*)$')
  if not c or (d ~= '' and d ~= '|d') then return nil end
  return tonumber(c), tonumber(v), d == '|d'
end
for i = 1, #ARGV, 2 do
  local nc, nv, nd = parse(ARGV[i + 1])
  if nc then
    local cc, cv, cd = parse(redis.call('HGET', KEYS[1], ARGV[i]))
    local below = not cc or cc < nc or (cc == nc and ((cd ~= nd and nd) or (cd == nd and cv < nv)))
    if below then redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
  end
end
return redis.status_reply('OK')
