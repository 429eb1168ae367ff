-- history_start: append a run's "started" event to a job's history stream,
-- with history_add.lua's keys and arguments (no once key). A start is
-- followed by its run's end, written by history_add.lua, which trims the
-- stream by age and renews its expiry: a start trims by count only and
-- renews nothing (two commands a run fewer), unless it makes the stream,
-- which then expires like any other. A worker that dies mid-run leaves its
-- start in the stream until the stream expires: at most the max age after
-- the job's previous event.
--
-- Returns the entry's ID.
redis.replicate_commands()
local id = redis.call('XADD', KEYS[1], 'NOMKSTREAM', 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 3))
if id then return id end
id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 3))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return id
