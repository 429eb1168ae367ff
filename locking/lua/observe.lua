-- observe: the current leader of an election, only if its lease still holds the lock.
--
-- KEYS[1] the election's lock key
-- KEYS[2] the leader record (KEYS[1]..':leader'), a hash
--
-- Returns {token, id, since (ms), fence} when the record's token is the lock
-- key's current value; nil when nobody holds the lock or the record belongs
-- to an earlier holder (a dead leader's record is ignored once its key expired).
local tok = redis.call('GET', KEYS[1])
if not tok then return false end
local v = redis.call('HMGET', KEYS[2], 'token', 'id', 'since', 'fence')
if v[1] ~= tok then return false end
return v
