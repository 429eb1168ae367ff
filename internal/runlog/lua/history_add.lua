-- history_add: append one event to a job's run history, bounded in count
-- and age by the server's clock.
--
-- KEYS[1] the job's history stream
-- KEYS[2] (optional) the event's once key: when given, the event is appended
--         only by the first call that sets it (it lives the max age); a
--         tick's not-run record is written by every replica that found it
--         so, and kept once
-- ARGV[1] keep about this many entries (XADD MAXLEN ~)
-- ARGV[2] max age, ms: older entries are trimmed (XTRIM MINID ~) and the
--         key expires this long after its last event
-- ARGV[3..] field, value, field, value, ...
--
-- Returns the entry's ID ("<ms>-<seq>": the event's time by Redis's clock),
-- or false when the once key was set already (nothing appended).
redis.replicate_commands()
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  return false
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 3))
-- the new entry's ID is the server's clock in ms (or, if that went back,
-- the stream's last ID): no TIME call of its own
local now = tonumber(string.match(id, '^(%d+)'))
redis.call('XTRIM', KEYS[1], 'MINID', '~', tostring(now - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return id
