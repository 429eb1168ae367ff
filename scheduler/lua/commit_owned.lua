-- commit_owned: record tick T of job J as dispatched before its run starts
-- (jobs that commit first: a run started in-process must not run again if
-- the owner loses its link to Redis afterwards), only while the caller still
-- holds the tick's lease.
--
-- KEYS[1] the tick J@T (the owner's token while leased)
-- KEYS[2] the job's mark (latest tick decided, unix ms)
-- ARGV[1] token of the lease's owner
-- ARGV[2] T, unix milliseconds
-- ARGV[3] tick record ttl, milliseconds
--
-- Returns 1 when recorded, 0 when the lease was not the caller's (expired,
-- taken over, or the tick already decided): the caller must not run it.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'done', 'PX', ARGV[3])
local m = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) > m then redis.call('SET', KEYS[2], ARGV[2]) end
return 1
