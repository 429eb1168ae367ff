-- head_number reads a number of a stored value's head as Store.parse does
-- (decimal): digits alone, at most int64's largest (leading zeros aside);
-- nil for anything else, which makes the value one readers cannot read.
local function head_number(s)
  if not s or not string.match(s, '^%d+$') then return nil end
  local d = (string.gsub(s, '^0+', ''))
  if #d > 19 or (#d == 19 and d > '9223372036854775807') then return nil end
  return tonumber(s)
end

-- read_record reads a stored value as Store.parse reads it: the head
-- (created ms, "+" and the ms to the last put, the shard's change), then
-- the schedule's own version (above 0) and the definition, or the
-- definition alone (a value of the earlier head: version 1); a definition
-- starts with "{", and every number fits an int64. Returns created,
-- updated (as stored), change, version and the definition, all strings
-- but the version; def is nil for a value readers cannot read (no
-- condition matches it).
-- Prepended to the scripts that read a record's head (put.lua, delete.lua).
local function read_record(cur)
  local c, u, v, rest = string.match(cur, '^(%d+)|(%+?%d+)|(%d+)|(.*)$')
  if not rest or not head_number(c) or not head_number(string.match(u, '^%+?(%d+)$')) or not head_number(v) then
    return nil, nil, nil, 0, nil
  end
  if string.sub(rest, 1, 1) == '{' then
    return c, u, v, 1, rest
  end
  local o, d = string.match(rest, '^(%d+)|({.*)$')
  local own = head_number(o)
  if own and own >= 1 then return c, u, v, own, d end
  return nil, nil, nil, 0, nil
end

-- record_matches tells whether a record of version own, created c, matches
-- a caller's condition: version ("" any) and created ms ("" any), compared
-- as numbers, as readers parse them.
local function record_matches(own, c, version, created)
  return (version == '' or tonumber(version) == own) and (created == '' or tonumber(created) == tonumber(c))
end
