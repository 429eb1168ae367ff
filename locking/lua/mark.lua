-- mark: give a master its marker, which lets it vote in quorums.
--
-- KEYS[1] the marker key (permanent)
-- ARGV[1] quarantine in milliseconds: the master votes from server time + quarantine on
--
-- Returns 1 when the marker was set, 0 when it already existed.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('SET', KEYS[1], string.format('%d', now + tonumber(ARGV[1])))
return 1
