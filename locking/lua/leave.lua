-- leave: a waiter gives up; remove it from the waiter set and the fair queue.
--
-- KEYS[1] the lock key
-- KEYS[2] the waiter set
-- KEYS[3] the fair queue
-- KEYS[4] the fair queue's data
-- ARGV[1] token (also the waiter id)
--
-- Returns 1 when a release had already handed the key to this token (the caller
-- must release it), 0 otherwise.
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('HDEL', KEYS[4], ARGV[1]) == 1 then redis.call('LREM', KEYS[3], 1, ARGV[1]) end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
