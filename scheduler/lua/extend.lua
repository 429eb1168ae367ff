-- extend: keep a tick lease alive while its owner waits for a dispatch slot
-- (a big instant, or a slow queue), so no other replica takes the tick over
-- from a live owner.
--
-- KEYS[1] the tick J@T
-- ARGV[1] token of the lease's owner
-- ARGV[2] tick lease ttl, milliseconds
--
-- Returns 1 when the lease was ours and runs ARGV[2] from now, 0 otherwise
-- (gone, another replica's, or the tick decided: never re-set).
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
