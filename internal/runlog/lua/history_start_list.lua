-- history_start_list: append a run's "started" event to a runtime
-- schedule's history list, with history_add_list.lua's keys and arguments
-- (no once key). As history_start.lua for a stream: the run's end trims the
-- list and renews its expiry, so a start only appends (and sets the expiry
-- of a list it makes).
--
-- Returns the entry's ID.
redis.replicate_commands()
local last = redis.call('LINDEX', KEYS[1], -1)
local elem, id = list_entry(last)
redis.call('RPUSH', KEYS[1], elem)
if not last then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return id
