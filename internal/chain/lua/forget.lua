-- Forgets the outcome record of a parent's tick that did not run, before a
-- backfill runs that tick again (Forget): a child must wait for the new
-- run's end, not read the old miss or pause. Any other record stays: a
-- success (the tick ran), and a failure or skip (a backfill racing this
-- one ran the tick, and its end is the tick's).
--
-- KEYS[1]  the outcome record NS:{<job>}:outcome:<tick ms>
--
-- Deletes the record if it says missed or paused; returns 1 if it deleted
-- one, else 0.
local v = redis.call('get', KEYS[1])
if v and (v == 'missed' or v == 'paused' or v:sub(1, 7) == 'missed ' or v:sub(1, 7) == 'paused ') then
  return redis.call('del', KEYS[1])
end
return 0
