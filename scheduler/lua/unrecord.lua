-- unrecord: turn the "done" a claim wrote before its run (commit_owned) on
-- some masters into the record of a tick that did not run, once the tick
-- is decided otherwise (missed or paused on a quorum): its commit never
-- reached a quorum, so the run never started, and "done" would say it ran.
-- Or withdraw it (no record: the tick is free to claim again), when the
-- dispatcher left the recorded tick to a replica whose job list takes it
-- (the run did not start here).
--
-- KEYS[1] the tick J@T
-- KEYS[2] the tick's writer J@T:by ("<token>:<fence>")
-- ARGV[1] the claim's token (hex)
-- ARGV[2] the record: "missed" or "paused"; "" to withdraw it
--
-- Returns 1 when the claim's own "done" was replaced (its ttl kept) or
-- withdrawn, 0
-- otherwise (another claim's record, or none: left alone).
if redis.call('GET', KEYS[1]) ~= 'done' then return 0 end
local by = redis.call('GET', KEYS[2])
if not by or string.match(by, '^(%x+):') ~= ARGV[1] then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
redis.call('DEL', KEYS[2])
return 1
