-- Forgets the outcome record of a parent's tick that did not run, before a
-- chain's backfill runs that tick again (Forget): a child dispatched by
-- the same backfill must wait for the new run's end, not read the old
-- miss or pause. A success is never forgotten: the tick ran.
--
-- KEYS[1]  the outcome record NS:{<job>}:outcome:<tick ms>
--
-- Deletes the record unless it says ok; returns 1 if it deleted one,
-- else 0.
local v = redis.call('get', KEYS[1])
if v and v ~= 'ok' then
  return redis.call('del', KEYS[1])
end
return 0
