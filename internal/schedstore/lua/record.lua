-- read_record reads a stored value as Store.parse reads it: the head
-- (created ms, "+" and the ms to the last put, the shard's change), then
-- the schedule's own version (above 0) and the definition, or the
-- definition alone (a value of the earlier head: version 1); a definition
-- starts with "{". Returns created, updated (as stored), change, version
-- and the definition, all strings but the version; def is nil for a value
-- readers cannot read (no condition matches it).
-- Prepended to the scripts that read a record's head (put.lua, delete.lua).
local function read_record(cur)
  local c, u, v, rest = string.match(cur, '^(%d+)|(%+?%d+)|(%d+)|(.*)$')
  if rest and string.sub(rest, 1, 1) == '{' then
    return c, u, v, 1, rest
  elseif rest then
    local o, d = string.match(rest, '^(%d+)|({.*)$')
    if o and tonumber(o) >= 1 then return c, u, v, tonumber(o), d end
  end
  return nil, nil, nil, 0, nil
end

-- record_matches tells whether a record of version own, created c, matches
-- a caller's condition: version ("" any) and created ms ("" any), compared
-- as numbers, as readers parse them.
local function record_matches(own, c, version, created)
  return (version == '' or tonumber(version) == own) and (created == '' or tonumber(created) == tonumber(c))
end
