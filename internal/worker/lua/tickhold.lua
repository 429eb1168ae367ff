-- A run of a concurrency-allow job holds its tick's ledger record while an
-- attempt runs (allow.go), so that a copy of the task put back into the
-- queue meanwhile does not run the tick again.
--
-- KEYS[1]  the tick's ledger record NS:{JOB}:tickrec:<tick ID>
-- ARGV[1]  op: "hold" or "keep"
-- ARGV[2]  this attempt's value, "running:<token>"
-- ARGV[3]  ttl, ms
--
-- hold: writes ARGV[2] for ARGV[3] ms unless the record has a value, and
--       returns that value (nil when it wrote its own).
-- keep: gives the record ARGV[3] ms more while it still holds ARGV[2];
--       returns 1, or 0 when it holds something else (done, another
--       attempt's, nothing).
local v = redis.call('get', KEYS[1])
if ARGV[1] == 'hold' then
  if v then
    return v
  end
  redis.call('set', KEYS[1], ARGV[2], 'px', ARGV[3])
  return false
end
if v == ARGV[2] then
  redis.call('pexpire', KEYS[1], ARGV[3])
  return 1
end
return 0
