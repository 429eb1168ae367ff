-- list_entry: put in front of the history list scripts (history_add_list.lua,
-- history_start_list.lua).
--
-- list_entry(last) returns the element that appends the event ARGV[3..]
-- (field, value, ...) to a list whose last element is last (false: none),
-- and its ID: "<ms>-<seq>", the server's clock in ms, or the last element's
-- ms with the next seq if the clock is not past it (as a stream's IDs).
local function list_entry(last)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local seq = 0
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
  return id .. ' ' .. cjson.encode(fields), id, now
end
