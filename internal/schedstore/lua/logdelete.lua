-- log_delete logs the delete of a schedule whose stored value was cur in
-- the shard's stream of changes (capped near cap), with the entry's
-- fields: no earlier than the deleted schedule's created (a record put
-- back by a restore, or created before Redis's clock went back, may be
-- later than the stream's last entry), so that a schedule put again after
-- it is created later (put.lua) and an ETag of this one does not match it.
-- A Redis that takes no "<ms>-*" entry id (before 7.0) logs it at "*".
-- Prepended to the scripts that delete (delete.lua, restore.lua).
local function log_delete(stream, cap, cur, ...)
  local at = '*'
  local c = tonumber(string.match(cur, '^(%d+)|') or '')
  if c then
    local t = redis.call('TIME')
    local top = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)[1]
    local ms = math.max(t[1] * 1000 + math.floor(t[2] / 1000), top and tonumber(string.match(top[1], '^(%d+)')) or 0)
    if c > ms then at = string.format('%d-*', c) end
  end
  local added = redis.pcall('XADD', stream, 'MAXLEN', '~', cap, at, ...)
  if type(added) == 'table' and added.err then
    redis.call('XADD', stream, 'MAXLEN', '~', cap, '*', ...)
  end
end
