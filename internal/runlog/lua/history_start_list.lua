-- history_start_list: append a run's "started" event to a runtime
-- schedule's history list, with history_add_list.lua's keys and arguments
-- (no once key). As history_start.lua for a stream, the run's end renews
-- the list's expiry and trims it, so a start only sets the expiry of a list
-- it makes, and trims it by count only when the last element is a start
-- too (an attempt whose worker died, or runs under way side by side): the
-- starts that no end follows keep the list bounded.
--
-- A start applied after its own end (a write that timed out and was
-- applied late) is not appended when that end is the last element: trimmed
-- alone later, it would read as the run still under way.
--
-- Returns the entry's ID, or false when it was not appended.
redis.replicate_commands()
local last = redis.call('LINDEX', KEYS[1], -1)
local run = arg_run()
if last and run and is_end(last) and names_run(last, run) and attempt_of(last) == arg_attempt() then
  return false
end
local elem, id = list_entry(last)
redis.call('RPUSH', KEYS[1], elem)
if last and is_start(last) then
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[1]), -1)
end
if not last then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return id
