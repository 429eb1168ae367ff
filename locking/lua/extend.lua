-- extend: push a held lock's expiry out, only for its holder.
--
-- KEYS[1] the lock key
-- ARGV[1] token
-- ARGV[2] ttl in milliseconds
--
-- Returns 1 when the key still held this token and was extended, 0 otherwise.
-- A key that has gone is never set again: that would revive a holder that lost it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
