-- history_add_list: append one event to a runtime schedule's run history,
-- a list (a stream costs at least 4.7 KB however little it holds; a small
-- list costs what it holds), bounded in count and age by the server's
-- clock. Each element is "<ms>-<seq> " and the event's fields as a JSON
-- array [field, value, ...]: the ID a stream would give it, then the
-- fields in the list's short form (listcodec.go): a run's end, the only
-- event without an event field, begins with its tick.
--
-- A run's end in a list says when it started (took_ms, short "d") and who
-- dispatched it (by), so it reads whole without its start: such an end,
-- when its run's start of the same attempt is the list's last element,
-- replaces it (an attempt that ended is one element), and trimming the
-- list by count never leaves an attempt that ended without its start. A
-- start whose end has not come is dropped by count like any element (a
-- run under way longer than ARGV[1] newer events shows running in status,
-- from its lease, not in the history).
--
-- KEYS[1] the schedule's history list
-- KEYS[2] (optional) the event's once key (see history_add.lua)
-- ARGV[1] keep at most this many elements
-- ARGV[2] max age, ms: older elements are trimmed and the key expires this
--         long after its last event
-- ARGV[3..] field, value, field, value, ...
--
-- Loaded after list_entry.lua. Returns the entry's ID, or false when the
-- once key was set already.
redis.replicate_commands()
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  return false
end
local last = redis.call('LINDEX', KEYS[1], -1)
local elem, id, now = list_entry(last)

-- the run's start of this attempt, when it is the last element: an end
-- that says how long it ran (took_ms, "d") takes its place
local replaces = false
local run = arg_run()
if last and run and arg('e') == nil and arg('d') and is_start(last) then
  replaces = names_run(last, run) and attempt_of(last) == arg_attempt()
end
if replaces then
  redis.call('LSET', KEYS[1], -1, elem)
else
  redis.call('RPUSH', KEYS[1], elem)
end
-- trimmed by count; but where none of the kept runs succeeded, the newest
-- success trimmed is kept as the oldest element, marked ("L"): the last
-- success survives the count (only a failing schedule pays the read)
local keep = tonumber(ARGV[1])
if is_ok_end(elem) then
  redis.call('LTRIM', KEYS[1], -keep, -1)
else
  local all = redis.call('LRANGE', KEYS[1], 0, -1)
  local n = #all
  if n > keep then
    local lastok
    for i = n, 1, -1 do
      if is_ok_end(all[i]) then
        if i > n - keep then break end -- a kept run succeeded
        lastok = all[i]
        break
      end
    end
    redis.call('LTRIM', KEYS[1], -keep, -1)
    if lastok then
      if not is_marked(lastok) then
        lastok = string.sub(lastok, 1, -2) .. ',"L","1"]'
      end
      redis.call('LPUSH', KEYS[1], lastok)
    end
  end
end
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
