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
--         key expires this long after its last event and a little more:
--         the renewal slack, min(max age / 8, 10 min), within which a
--         worker's plain-command ends leave the expiry alone (see
--         renewSlack in runlog.go, which computes the same)
-- ARGV[3..] field, value, field, value, ...
--
-- Returns the entry's ID ("<ms>-<seq>": the event's time by Redis's clock),
-- or false when the once key was set already (nothing appended).
redis.replicate_commands()
local function h_expiry(age)
  age = tonumber(age)
  return age + math.min(math.floor(age / 8), 600000)
end
if KEYS[2] and not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then
  return false
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 3))
-- the new entry's ID is the server's clock in ms (or, if that went back,
-- the stream's last ID): no TIME call of its own
local now = tonumber(string.match(id, '^(%d+)'))
redis.call('XTRIM', KEYS[1], 'MINID', '~', tostring(now - tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], h_expiry(ARGV[2]))
return id
