-- The side record of a slot of a limit (limit.go), written and deleted by
-- the run it names, by the slot's fence: a run whose slot was lost (it
-- expired while its worker froze) and taken by another run must neither
-- overwrite nor delete the new holder's record, whose fence is higher.
--
-- KEYS[1]  the record NS:{limit:<limit>}:holder:<i>
-- ARGV[1]  op: "set" or "del"
-- ARGV[2]  the fence of the slot the run holds
-- ARGV[3]  set: the record
-- ARGV[4]  set: its ttl, ms
--
-- set: writes ARGV[3] for ARGV[4] ms unless the record names a higher
--      fence; returns 1 if it wrote, else 0.
-- del: deletes the record if it names fence ARGV[2]; returns 1 if it did,
--      else 0.
local fence = tonumber(ARGV[2])
local held = nil
local v = redis.call('get', KEYS[1])
if v then
  local ok, r = pcall(cjson.decode, v)
  if ok and type(r) == 'table' then
    held = tonumber(r.fence)
  end
end
if ARGV[1] == 'set' then
  if held and held > fence then
    return 0
  end
  redis.call('set', KEYS[1], ARGV[3], 'px', ARGV[4])
  return 1
end
if held == fence then
  return redis.call('del', KEYS[1])
end
return 0
