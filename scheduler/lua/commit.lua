-- commit: record tick T of job J as dispatched and free its lease.
--
-- KEYS[1] the tick record J@T
-- KEYS[2] the tick lease J@T
-- KEYS[3] the job's mark (latest tick decided, unix ms)
-- ARGV[1] token of the lease's owner
-- ARGV[2] T, unix milliseconds
-- ARGV[3] tick record ttl, milliseconds
--
-- The record is written whoever holds the lease: the run is in the queue (a
-- dispatch is idempotent per tick), so "done" is true. The lease is deleted
-- only if it is still ours. Returns 1 when it was, 0 otherwise.
redis.call('SET', KEYS[1], 'done', 'PX', ARGV[3])
local m = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[2]) > m then redis.call('SET', KEYS[3], ARGV[2]) end
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  return 1
end
return 0
