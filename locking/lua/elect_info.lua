-- elect_info: record who leads an election, only while this token holds its lock.
--
-- KEYS[1] the election's lock key
-- KEYS[2] the leader record (KEYS[1]..':leader'), a hash
-- ARGV[1] token of the leader's lease
-- ARGV[2] leader id
-- ARGV[3] fence (decimal integer)
-- ARGV[4] record expiry in milliseconds (outlives the lease; a stale record is
--         ignored by observe anyway)
-- ARGV[5] wake channel
-- ARGV[6] the election lock's name, for the wake message
--
-- Returns the term's start (server time, ms) when written, 0 when the lock is
-- not held by this token. Publishes "e|<token>|<name>" when written: the
-- election's observers read the new leader.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[2], 'token', ARGV[1], 'id', ARGV[2], 'since', string.format('%d', now), 'fence', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call('PUBLISH', ARGV[5], 'e|' .. ARGV[1] .. '|' .. ARGV[6])
return now
