-- release: give up a tick lease without dispatching (the dispatch failed, or
-- a quorum split), so another replica can claim the tick.
--
-- KEYS[1] the tick J@T
-- ARGV[1] token of the lease's owner
--
-- Returns 1 when the lease was ours and is gone, 0 otherwise (another
-- replica's lease, or the tick already decided: both are left alone).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
