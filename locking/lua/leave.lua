-- leave: a waiter gives up; remove it from the waiter set, the fair queue and the
-- writers' intents (a read/write lock's).
--
-- KEYS[1] the lock key L; its waiter set L..':w', fair queue L..':q', queue data
--         L..':qd', shares L..':r' and writers' intents L..':wi' are named from it
--         (see acquire, rw_acquire, sem_acquire)
-- ARGV[1] token (also the waiter id)
-- ARGV[2] wake channel
-- ARGV[3] the lock's name, for the wake message
--
-- Returns 1 when the key or a share was granted to this token after all (a release
-- handed it over, or an attempt's answer was lost): the caller must release it; 0
-- otherwise. A writer's intent that goes, or a queue head that leaves, may let
-- others go: it publishes "a|<token>|<name>" (every waiter of the name re-checks).
local L = KEYS[1]
local W, Q, QD = L .. ':w', L .. ':q', L .. ':qd'
redis.call('ZREM', W, ARGV[1])
local wake = redis.call('ZREM', L .. ':wi', ARGV[1]) == 1
if redis.call('HDEL', QD, ARGV[1]) == 1 then
  wake = wake or redis.call('LINDEX', Q, 0) == ARGV[1]
  redis.call('LREM', Q, 1, ARGV[1])
end
if wake and ARGV[2] then redis.call('PUBLISH', ARGV[2], 'a|' .. ARGV[1] .. '|' .. ARGV[3]) end
if redis.call('GET', L) == ARGV[1] then return 1 end
if redis.call('ZSCORE', L .. ':r', ARGV[1]) then return 1 end
return 0
