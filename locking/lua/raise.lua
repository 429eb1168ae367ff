-- raise: lift fencing counters to at least the given values (repair of a master
-- that restarted empty).
--
-- KEYS[1..n] fencing counters
-- ARGV[1..n] the value each must reach (decimal integers)
--
-- Returns the number of counters raised.
local n = 0
for i = 1, #KEYS do
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  if c < tonumber(ARGV[i]) then
    redis.call('SET', KEYS[i], ARGV[i])
    n = n + 1
  end
end
return n
