-- extend: push a held lock's expiry out, only for its holder.
--
-- KEYS[1] the lock key
-- KEYS[2] optional: a companion that lives with the lock (an election's
--         leader record), pushed out with it
-- ARGV[1] token
-- ARGV[2] ttl in milliseconds
-- ARGV[3] with KEYS[2]: the companion's expiry in milliseconds
--
-- Returns 1 when the key still held this token and was extended, 0 otherwise.
-- A key that has gone is never set again: that would revive a holder that lost it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  if KEYS[2] then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
