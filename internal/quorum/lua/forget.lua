-- forget: drop the fencing counters (and other keys) of names that are gone
-- for good from one master of a quorum, without letting a later fence of
-- theirs go back. Loaded after the quorum prelude (q_int, q_floor).
--
-- KEYS[1]            the master's forgotten floor (MARKER:forgotten, see
--                    q_forgotten in the prelude; permanent, one per master)
-- KEYS[2..ARGV[1]+1] fencing counters to delete
-- KEYS[ARGV[1]+2..]  other keys to delete (a job's mark)
--
-- The floor is raised to one above the largest counter deleted, so a counter
-- seeded again on this master starts above every fence it issued. Any fence
-- ever issued sits on a majority's counters (equal answers, or the largest
-- written back), so every later majority holds a master whose counter or
-- floor is at least that fence: the next fence is above it whatever the
-- masters' clocks say. A counter that holds anything but a fence (corrupt,
-- see q_count) is deleted without raising the floor, as its repair would be.
--
-- Returns the floor after the call.
local n = tonumber(ARGV[1])
local top = 0
for i = 2, n + 1 do
  local v = redis.pcall('GET', KEYS[i])
  local c = type(v) == 'string' and q_int(v)
  if c and c > top then top = c end
end
local cur = redis.call('GET', KEYS[1])
local floor = (cur and q_floor(cur)) or 0
if top + 1 > floor then
  floor = top + 1
  redis.call('SET', KEYS[1], string.format('%d', floor))
end
for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
return floor
