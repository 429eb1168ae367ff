-- list_entry: put in front of the history list scripts (history_add_list.lua,
-- history_start_list.lua).
--
-- list_entry(last) returns the element that appends the event ARGV[3..]
-- (field, value, ...) to a list whose last element is last (false: none),
-- and its ID: "<ms>-<seq>", the server's clock in ms, or the last element's
-- ms with the next seq if the clock is not past it (as a stream's IDs). A
-- tick given in unix ms is written as the ID's ms less it (listcodec.go).
--
-- Below it, the helpers that read the event's arguments and an element.
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
  -- the tick in unix ms ("t") is written as the element's ms less it
  local fields = {}
  for i = 3, #ARGV do
    local v = ARGV[i]
    if i % 2 == 0 and ARGV[i - 1] == 't' and string.match(v, '^%d+$') then
      v = string.format('%d', now - tonumber(v))
    end
    fields[#fields + 1] = v
  end
  local id = string.format('%d-%d', now, seq)
  return id .. ' ' .. cjson.encode(fields), id, now
end

-- arg is the value of field name in the event ARGV[3..], nil when absent.
local function arg(name)
  for i = 3, #ARGV - 1, 2 do
    if ARGV[i] == name then return ARGV[i + 1] end
  end
  return nil
end

-- arg_run is the event's run id, in the form the element gives it ("R":
-- runid.New's in base64, "r": any other), nil when none.
local function arg_run()
  local run = arg('R') or arg('r')
  if run == '' then return nil end
  return run
end

-- arg_attempt is the attempt the event names ("a"; left out: 1).
local function arg_attempt()
  return arg('a') or '1'
end

-- of elements: a run's start begins with its event "S"; a run's end, the
-- only event without one, with its tick.
local function is_start(elem)
  return string.find(elem, '^%d+%-%d+ %["e","S",') ~= nil
end
local function is_end(elem)
  return string.find(elem, '^%d+%-%d+ %["t",') ~= nil
end

-- is_ok_end tells a run's end that succeeded (no status: ok); is_marked an
-- element kept beyond the count as the last success (its last field "L").
local function is_ok_end(elem)
  return is_end(elem) and string.find(elem, ',"s",', 1, true) == nil
end
local function is_marked(elem)
  return string.sub(elem, -9) == ',"L","1"]'
end

-- names_run tells whether elem names run (arg_run's) as its run id, and
-- attempt_of is the attempt it names. A field name, unescaped quotes
-- around it, is never inside a value (JSON escapes a value's quotes); the
-- run id is compared as the element holds it, JSON (cjson escapes '"',
-- '\' and '/'), so that any run id matches itself.
local function names_run(elem, run)
  local s, e = string.find(elem, ',"[rR]",')
  if not s or string.sub(elem, s + 2, s + 2) ~= (arg('R') and 'R' or 'r') then
    return false
  end
  local enc = cjson.encode(run)
  local held = string.sub(elem, e + 1, e + #enc + 1)
  return held == enc .. ',' or held == enc .. ']'
end
local function attempt_of(elem)
  return string.match(elem, ',"a","(%d+)"[,%]]') or '1'
end
