-- commit: record tick T of job J as dispatched, which ends its lease.
--
-- KEYS[1] the tick J@T (the owner's token while leased)
-- KEYS[2] the job's mark (latest tick decided, unix ms)
-- ARGV[1] T, unix milliseconds
-- ARGV[2] tick record ttl, milliseconds
--
-- "done" is written whoever holds the lease: the run is in the queue (a
-- dispatch is idempotent per tick, asynq task ID J@T), so "done" is true,
-- and a replica that took the tick over after this owner's lease expired
-- finds it done or dispatches into the same task ID.
redis.call('SET', KEYS[1], 'done', 'PX', ARGV[2])
-- a corrupt mark (see q_count, in the quorum prelude) is left as it is: the
-- record is written, and the job's next claim reports the mark
q_raise_mark(2, ARGV[1])
return 1
