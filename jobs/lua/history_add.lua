-- history_add: append one event to a job's run history, bounded in count
-- and age by the server's clock.
--
-- KEYS[1] the job's history stream
-- ARGV[1] keep about this many entries (XADD MAXLEN ~)
-- ARGV[2] max age, ms: older entries are trimmed (XTRIM MINID ~) and the
--         key expires this long after its last event
-- ARGV[3..] field, value, field, value, ...
--
-- Returns the entry's ID ("<ms>-<seq>": the event's time by Redis's clock).
redis.replicate_commands()
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 3))
redis.call('XTRIM', KEYS[1], 'MINID', '~', tostring(now - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return id
