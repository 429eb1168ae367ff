-- commit_owned: record tick T of job J as dispatched before its run starts
-- (jobs that commit first: a run started in-process must not run again if
-- the owner loses its link to Redis afterwards), only while the caller still
-- holds the tick's lease. The record names the claim that wrote it, so the
-- owner can tell its own commit from another's when an answer was lost.
--
-- KEYS[1] the tick J@T (the owner's token while leased; "done" once
--         recorded: the value older replicas read)
-- KEYS[2] the job's mark (latest tick decided, unix ms)
-- KEYS[3] the tick's writer J@T:by, "<token>:<fence>": the claim that
--         recorded it done and the fence it dispatches with
-- ARGV[1] token of the lease's owner (hex)
-- ARGV[2] T, unix milliseconds
-- ARGV[3] tick record ttl, milliseconds
-- ARGV[4] the claim's dispatch fence
--
-- Returns 1 when recorded, now or by an earlier call of the same claim (an
-- answer lost or late: the call can be sent again); 0 when the lease was not
-- the caller's (expired, taken over, or the tick decided by another): the
-- caller must not run it.
local v = redis.call('GET', KEYS[1])
if v == 'done' then
  local by = redis.call('GET', KEYS[3])
  if by and string.match(by, '^(%x+):') == ARGV[1] then return 1 end
  return 0
end
if v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'done', 'PX', ARGV[3])
redis.call('SET', KEYS[3], ARGV[1] .. ':' .. ARGV[4], 'PX', ARGV[3])
-- a corrupt mark (see q_count, in the quorum prelude) is left as it is: the
-- record is written, and the job's next claim reports the mark
q_raise_mark(2, ARGV[2])
return 1
