-- unskip: take back the skips of a job's ticks on one lock master (a
-- runtime schedule deleted: one put again under its id is a new one, not
-- skipped). A tick's record goes only while it still says "paused" (a
-- claim's lease or a "done" stays), with its skip key; then the job's set
-- of skipped ticks.
--
-- KEYS[2i-1] tick i, J@T (scheduler.TickKey), as the set listed it
-- KEYS[2i]   its skip key, J@T:skip
-- KEYS[2n+1] the job's skipped ticks (lua/skip.lua)
--
-- Returns how many records it deleted.
local n = (#KEYS - 1) / 2
local gone = 0
for i = 1, n do
  if redis.pcall('GET', KEYS[2 * i - 1]) == 'paused' then
    redis.call('DEL', KEYS[2 * i - 1])
    gone = gone + 1
  end
  redis.call('DEL', KEYS[2 * i])
end
redis.call('DEL', KEYS[2 * n + 1])
return gone
