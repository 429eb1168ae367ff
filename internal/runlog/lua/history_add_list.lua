-- history_add_list: append one event to a runtime schedule's run history,
-- a list (a stream costs at least 4.7 KB however little it holds; a small
-- list costs what it holds), bounded in runs and age by the server's
-- clock. Each element is "<ms>-<seq> " and the event's fields as a JSON
-- array [field, value, ...]: the ID a stream would give it, then the
-- fields in order, which start "v", V, "e", EV, "t", T, "r", RUN (runlog's
-- tickFields, in the list's short form: listcodec.go; an entry written
-- before it says "ev", "tick" and "run").
--
-- KEYS[1] the schedule's history list
-- KEYS[2] (optional) the event's once key (see history_add.lua)
-- ARGV[1] keep the entries of at most this many runs, the newest: the
--         events of one run (its run id: attempts, a start and an end) go
--         together, so a run is kept whole or not at all, however many
--         events it wrote; an event without a run id is a run of its own
-- ARGV[2] max age, ms: older entries are trimmed and the key expires this
--         long after its last event
-- ARGV[3..] field, value, field, value, ...
--
-- Loaded after list_entry.lua. Returns the entry's ID, or false when the
-- once key was set already.
redis.replicate_commands()
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  return false
end
local elems = redis.call('LRANGE', KEYS[1], 0, -1)
local new, id, now = list_entry(elems[#elems] or false)
elems[#elems + 1] = new
redis.call('RPUSH', KEYS[1], new)

-- the oldest element to keep: walk from the newest, counting runs
local keep, runs, seen = tonumber(ARGV[1]), 0, {}
local oldest = now - tonumber(ARGV[2])
local from = 1
for i = #elems, 1, -1 do
  local e = elems[i]
  local ms = tonumber(string.match(e, '^(%d+)-') or '')
  if ms and ms < oldest then
    from = i + 1
    break
  end
  local run = string.match(e, '^%S+ %["v","[^"]*","e","[^"]*","t","[^"]*","r","([^"]*)"') or
    string.match(e, '^%S+ %["v","[^"]*","ev","[^"]*","tick","[^"]*","run","([^"]*)"')
  if not run or run == '' then
    runs = runs + 1
  elseif not seen[run] then
    seen[run] = true
    runs = runs + 1
  end
  if runs > keep then
    from = i + 1
    break
  end
end
if from > 1 then
  redis.call('LTRIM', KEYS[1], from - 1, -1)
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return id
