-- claim: decide who dispatches tick T of job J, on one lock master. Loaded
-- after the quorum prelude (q_guard, q_fence: internal/quorum/lua/prelude.lua),
-- which it shares with the lock acquire.
--
-- One key per tick holds both its lease and its record: while a replica
-- dispatches the tick its value is the owner's token (ttl: the tick lease);
-- once decided it is "done" or "paused" (ttl: beyond the starting deadline).
-- A "done" written before the run (commit_owned.lua) has a second key, J@T:by,
-- naming the claim that wrote it.
--
-- KEYS[1] the tick J@T
-- KEYS[2] the job's pause flag (present = paused)
-- KEYS[3] the job's mark: the latest tick decided (dispatched, paused or
--         recorded missed; unix ms); lists catch-up
--         candidates after downtime, never answers "done"
-- KEYS[4] the job's dispatch fencing counter
-- KEYS[5] the tick's writer J@T:by ("<token>:<fence>", see commit_owned.lua)
-- KEYS[6] this master's marker key (modes "q" and "s"; absent in mode "u")
-- ARGV[1] token (random hex, >= 128 bits)
-- ARGV[2] T, unix milliseconds
-- ARGV[3] starting deadline, milliseconds: later than T + this, the tick is missed
-- ARGV[4] tick lease ttl, milliseconds
-- ARGV[5] tick record ttl, milliseconds (beyond the starting deadline)
-- ARGV[6] mode: "q" one of a quorum, "s" a single master, "u" a single
--         master whose restarts are not tracked (a Cluster: no marker)
-- ARGV[7] "1" when the job is paused in its configuration
-- ARGV[8] the replicas' clock skew bound, milliseconds: a replica within it may
--         have claimed and recorded a tick up to this much before it was due
-- ARGV[9] the claim's kind: "" a tick of the schedule; "drop" a tick the job's
--         catch-up policy left out (after a restart or an outage): unless
--         decided or leased already, it is recorded "missed" like a tick past
--         its starting deadline; "backfill" a tick Backfill dispatches: a
--         tick recorded "missed" or "paused", or with no record, is granted
--         whatever its age and the pause flag; a "done" tick is DONE and a
--         leased one BUSY as ever
--
-- Returns {0, fence} OWNED: the caller holds the tick lease and must dispatch
--         {1, 0}     DONE: the tick was dispatched
--         {8, 0}     DONE BY ANOTHER CLAIM before its run (commit_owned): the
--                    run started only if a quorum of masters holds that
--                    record, so the caller weighs it with the other masters'
--                    answers (a backfill answers DONE)
--         {7, fence} MINE: the tick is recorded done by this claim's own commit
--                    (ARGV[1]), whose answer its owner did not get; fence is
--                    the one it was recorded with
--         {2, ms}    BUSY: another replica holds the tick lease for ms more
--         {3, ms, first} MISSED: now is ms past T, beyond the starting deadline; the
--                    tick is recorded "missed", first = 1 for the claim that
--                    recorded it (so it is logged and counted once), else 0
--         {4, 0}     PAUSED: recorded as skipped (now or before). Pausing is decided
--                    by a quorum of masters, like owning: a master paused alone
--                    (a pause or resume that reached only some masters) neither
--                    grants nor refuses
--         {6, ms}    EARLY: T is more than the skew bound (ARGV[8]) ahead of this
--                    master's clock: not yet, ask again in ms. Nothing is written
--                    (a record made now would expire before T is due)
--         {5, ms}    ABSTAIN: this master restarted after T's record may have been
--                    written (ms: its start minus T) and may have lost it; it
--                    neither grants nor refuses
--         {-1, 0}    the master's marker is missing (restarted or flushed since
--                    the client checked it): it grants nothing until repaired
-- Fails with "CORRUPT 3 VALUE" or "CORRUPT 4 VALUE" (see q_count), writing
-- nothing, when the mark or the fencing counter holds anything but an integer
-- below 2^53, and with "CORRUPTREC 1 VALUE" when the tick holds anything but
-- a record these scripts write or a claim token (read as a lease, it would
-- keep the tick busy, and unrecorded, for as long as it stays), and with
-- "CORRUPTBY 5 VALUE" when the writer of a "done" is not "<token>:<fence>"
-- with a fence an acquire could issue.
local t = q_time()
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local quorum = ARGV[6] == 'q'
local floor, born = 0, 0
if ARGV[6] ~= 'u' then
  floor, born = q_guard(KEYS[6])
  if not floor then return {-1, 0} end
end
-- the mark, the fence and the tick in one read; a key of another type reads
-- as missing: a counter's is looked at again (q_counted), the tick's is
-- found by its first write (set_tick), before anything is written
local got = redis.call('MGET', KEYS[3], KEYS[4], KEYS[1])
local mark, corrupt = q_counted(3, got[1])
if not mark then return corrupt end
local _, corrupt4 = q_counted(4, got[2])
if corrupt4 then return corrupt4 end

local v = got[3]
local read = v -- as read (a backfill takes a "missed" or "paused" tick as free)
-- set_tick writes the tick's record or lease: over a tick MGET read as
-- missing only if it is (NX), so one of another type is reported, unwritten
local function set_tick(val, px)
  if read then
    redis.call('SET', KEYS[1], val, 'PX', px)
    return true
  end
  return redis.call('SET', KEYS[1], val, 'NX', 'PX', px)
end
local function notstring() return redis.error_reply('CORRUPTREC 1 (not a string)') end
if v and v ~= 'done' and v ~= 'missed' and v ~= 'paused' and not string.find(v, '^%x+$') then
  return redis.error_reply('CORRUPTREC 1 ' .. string.sub(v, 1, 64))
end
local backfill = ARGV[9] == 'backfill'
if v == 'done' then
  local by = redis.pcall('GET', KEYS[5])
  if by then
    local token, fence
    if type(by) == 'string' then token, fence = string.match(by, '^(%x+):(%d+)$') end
    -- a fence is issued from 1 to 2^53-1 (see q_int: one above a counter)
    if not token or fence == '0' or not (q_int(fence) or fence == '9007199254740991') then
      return redis.error_reply('CORRUPTBY 5 ' .. (type(by) == 'string' and string.sub(by, 1, 64) or '(not a string)'))
    end
    if token == ARGV[1] then return {7, tonumber(fence)} end
    if not backfill then return {8, 0} end
  end
  return {1, 0}
end
if backfill and (v == 'missed' or v == 'paused') then v = false end
if v == 'paused' then return {4, 0} end
local tick = tonumber(ARGV[2])
if v == 'missed' then return {3, now - tick, 0} end
-- an answer that writes nothing (EARLY, ABSTAIN) first makes sure a tick
-- MGET read as missing is (set_tick finds one of another type otherwise)
local early = tick > now + tonumber(ARGV[8])
local abstain = born > 0 and tick < born + tonumber(ARGV[8])
if (early or abstain) and not read and redis.call('EXISTS', KEYS[1]) == 1 then return notstring() end
if early then return {6, tick - tonumber(ARGV[8]) - now} end
-- restarted after the tick's record may have been written (as early as the
-- skew bound before it was due): the record may have been lost with the old
-- process, so this master cannot say the tick is free
if abstain then return {5, born - tick} end
if v and v ~= ARGV[1] then
  local ms = redis.call('PTTL', KEYS[1])
  if ms < 0 then ms = 0 end
  return {2, ms}
end
if not backfill and (ARGV[9] == 'drop' or now > tick + tonumber(ARGV[3])) then
  if not set_tick('missed', ARGV[5]) then return notstring() end
  -- decided: a catch-up after a restart starts after it
  if tick > mark then redis.call('SET', KEYS[3], ARGV[2]) end
  return {3, now - tick, 1}
end

if not backfill and (ARGV[7] == '1' or redis.call('EXISTS', KEYS[2]) == 1) then
  if not set_tick('paused', ARGV[5]) then return notstring() end
  if tick > mark then redis.call('SET', KEYS[3], ARGV[2]) end
  return {4, 0}
end

if not set_tick(ARGV[1], ARGV[4]) then return notstring() end
-- one master: the counter outlives the tick record (its clock keeps the next
-- fence above it anyway)
return {0, q_fence(KEYS[4], quorum, t, floor, ARGV[5])}
