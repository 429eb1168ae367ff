-- history_start_list: append a run's "started" event to a runtime
-- schedule's history list, with history_add_list.lua's keys and arguments
-- (no once key). As history_start.lua for a stream, the run's end renews
-- the list's expiry, so a start only sets the expiry of a list it makes;
-- it trims the list by count, as its end does: the starts of attempts whose
-- worker died keep it bounded.
--
-- A start applied after its own end (a write that timed out and was
-- applied late) is not appended when that end is the last element: trimmed
-- alone later, it would read as the run still under way.
--
-- Returns the entry's ID, or false when it was not appended.
redis.replicate_commands()
local last = redis.call('LINDEX', KEYS[1], -1)
if last and ARGV[9] == 'r' and ARGV[10] ~= '' then
  local attempt
  for i = 3, #ARGV - 1, 2 do
    if ARGV[i] == 'a' then attempt = ARGV[i + 1] end
  end
  local run = string.match(last, '^%S+ %["v","[^"]*","e","finished","t","[^"]*","r","([^"]*)",')
  if attempt and run == ARGV[10] and string.find(last, ',"a","' .. attempt .. '",', 1, true) then
    return false
  end
end
local elem, id = list_entry(last)
redis.call('RPUSH', KEYS[1], elem)
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[1]), -1)
if not last then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return id
