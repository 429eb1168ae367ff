-- history_add_list: append one event to a runtime schedule's run history,
-- a list (a stream costs at least 4.7 KB however little it holds; a small
-- list costs what it holds), bounded in count and age by the server's
-- clock. Each element is "<ms>-<seq> " and the event's fields as a JSON
-- array [field, value, ...]: the ID a stream would give it, then the
-- fields in order.
--
-- KEYS[1] the schedule's history list
-- KEYS[2] (optional) the event's once key (see history_add.lua)
-- ARGV[1] keep at most this many entries
-- ARGV[2] max age, ms: older entries are trimmed and the key expires this
--         long after its last event
-- ARGV[3..] field, value, field, value, ...
--
-- Returns the entry's ID, or false when the once key was set already.
redis.replicate_commands()
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  return false
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local seq = 0
local last = redis.call('LINDEX', KEYS[1], -1)
if last then
  local ms, s = string.match(last, '^(%d+)-(%d+) ')
  if ms and tonumber(ms) >= now then
    now = tonumber(ms)
    seq = tonumber(s) + 1
  end
end
local fields = {}
for i = 3, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
local id = string.format('%d-%d', now, seq)
redis.call('RPUSH', KEYS[1], id .. ' ' .. cjson.encode(fields))
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[1]), -1)
local oldest = now - tonumber(ARGV[2])
for _ = 1, 100 do
  local first = redis.call('LINDEX', KEYS[1], 0)
  if not first then
    break
  end
  local ms = tonumber(string.match(first, '^(%d+)-'))
  if ms and ms >= oldest then
    break
  end
  redis.call('LPOP', KEYS[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return id
