-- leave: a waiter gives up; remove it from the waiter set and the fair queue.
--
-- KEYS[1] the lock key L; its waiter set L..':w', fair queue L..':q' and queue data
--         L..':qd' are named from it (see acquire)
-- ARGV[1] token (also the waiter id)
--
-- Returns 1 when a release had already handed the key to this token (the caller
-- must release it), 0 otherwise.
local W, Q, QD = KEYS[1] .. ':w', KEYS[1] .. ':q', KEYS[1] .. ':qd'
redis.call('ZREM', W, ARGV[1])
if redis.call('HDEL', QD, ARGV[1]) == 1 then redis.call('LREM', Q, 1, ARGV[1]) end
if redis.call('GET', KEYS[1]) == ARGV[1] then return 1 end
return 0
