// Package scheduler turns a job list into ticks and makes every tick of every
// job dispatch exactly once across any number of replicas.
//
// A tick's identity is (job, the UTC instant it is due), never the moment a
// replica noticed it: every replica computes the same ticks from the same
// spec (schedule.go, calendar.go), with @every aligned to the Unix epoch and
// daylight-saving days handled the way Vixie cron handles them. For each tick
// the replicas race through one atomic claim script on the lock masters; the
// winner hands the tick to a Dispatcher (tick.go: asynq enqueues it under the
// task ID "job@tick", a local job starts in-process) and commits it as done.
//
// # A tick's life, in file order
//
//	loop       scheduler.go  Run: a heap of items by fire time; waitTurn,
//	           │             routeReady (each job's next tick, followers
//	           │             deferred), claimChunks; retries come back
//	           ▼
//	claim      claim.go      process: skipDone (followers read the record),
//	           │             claim (lua/claim.lua on every master), decide
//	           │             (the quorum's verdict, per tick)
//	           ├─ owned ──▶ dispatch   dispatch.go  startDispatches, recordAfter
//	           │                │
//	           │                ▼
//	           │            commit     commit.go    "done" on a quorum
//	           ├─ busy, split, early ──▶ retry: back to the loop
//	           ├─ failing again ──────▶ hold      outage.go
//	           └─ paused, missed ─────▶ recorded not run, with why
//
// scheduler.go: Run keeps one heap of items (a claim to make: job, tick,
// fire time, kind). It starts its loops (startLoops: membership, skew,
// the held ticks' probe), queues each job's regular entry beside the
// catch-up (startTicks), then turns: waitTurn waits for the earliest item,
// a retry or a changed job list; routeReady routes the ready items; and
// claimChunks claims them. In routeReady a job's regular entry (kindNext)
// pushes the job's next tick when it fires; a tick's preferred claimer,
// chosen by hash over the live replicas (membership.go), claims it at
// once; the others (followers) claim it after a delay and normally find it
// done. claimChunks claims the items that come due together in chunks of
// up to claimChunk, one pipelined round trip per master each, at most
// claimsInFlight at once (claimgate.go); each chunk goes to runBatch,
// which routes what the claim leaves: retries to the heap, held ticks to
// the outage's probe. A replica whose clock is off Redis TIME beyond the
// bound claims nothing (skew.go). shutDown ends Run in the order Run's
// doc gives.
//
// claim.go: process claims a batch. A follower's item first reads the tick's
// record with a plain MGET (skipDone), which is cheaper than the script. The
// claim script answers per master (OWNED with a fence, DONE, BUSY with the
// lease's remaining ttl, MISSED, PAUSED, EARLY, ABSTAIN after a restart,
// MINE for this claim's own record); decide turns a tick's answers into a
// decision, a pure function of (item, answers, now): owned (dispatch with
// this fence), done, retry at an instant, hold (the masters fail again),
// not run with a reason; and what to undo on the masters (a lease held on a
// minority is released, this claim's own "done" that never reached a
// quorum is replaced by "missed" or "paused"). process carries the
// decisions out and returns what to retry and what to hold; it never
// reschedules itself.
//
// dispatch.go: the owned ticks go to the Dispatcher, a bounded number at a
// time; leases of ticks still waiting for a slot are extended. The job's
// recording (recordAfter, the default) hands each tick off and settles its
// result: dispatched (commit it), failed (release, retry or hold), left to
// a replica whose job list takes it (ErrLeftToOthers), no more ticks for
// the job (ErrJobDone).
//
// commit.go: a dispatched tick is recorded "done" on a quorum, and the job's
// mark advanced, in pipelined chunks, sent again to the masters that did not
// answer while the lease holds.
//
// # Off the plain path
//
// commit_first.go: a CommitFirst job (a local run) has the other recording,
// recordBefore: its tick is recorded before its dispatch, token-checked,
// and runs only if a quorum has it.
//
// outage.go: a tick whose claim or dispatch fails twice is held, not
// retried: every heldProbe the held ticks are claimed again as the job's
// catch-up policy says (the newest kept, the others claimed as kindDrop,
// which records them missed unless some replica dispatched them), so an
// outage of the lock masters or the queue ends without a burst of stale
// ticks. The job's current tick is always kept.
//
// trace.go: with WithTracerProvider, each tick a claim won gets a
// "baton.claim" span (recorded after the fact: one round trip decides a
// batch), the root of the tick's trace, and its dispatch a child
// "baton.dispatch" span, which the ctx handed to Dispatch carries on to
// the run. Off, the tracer is nil and nothing of it runs.
//
// backfill.go: Backfill is another caller of the same claim, on a
// scheduler that does not Run. Its items are kindBackfill: the claim script
// grants a tick recorded missed or paused, or with no record, whatever its
// age; "done" and a live lease refuse it as ever, so a tick is dispatched
// at most once, also with backfills racing the schedule. It routes what
// process returns itself: retries and held ticks go back into its own queue.
//
// catchup.go: at start, Run reads every job's mark (the latest tick decided)
// before its first claim and lists the ticks from the mark (or from the
// definition's Since, when it was put after the mark) to now: those
// past the starting deadline are counted missed (once across replicas), the
// live ones are claimed as the catch-up policy chooses (catchupKeeps, which
// the outage's probe uses too), the rest as kindDrop.
//
// # Guarantees
//
// At most once: a tick is dispatched only by the holder of its lease on a
// quorum, and never after a quorum recorded it done; a dispatcher's task ID
// dedupes an owner that died between dispatch and commit. At least once or
// recorded: a tick that is not dispatched is claimed again until it is, or
// until a quorum records why not (missed, paused, left out by the catch-up
// policy); a tick never vanishes without a record. The Lua scripts in lua/
// document their KEYS and ARGV; keys.go builds the keys and loads the
// scripts.
//
// # Exported names
//
// [New] makes a [Scheduler] of [Job] values and a [Dispatcher] (or a
// [DispatcherFunc]; one that is also a [Prechecker] or a [Recorder] is
// asked before and told after), with the [Option] values [WithNamespace],
// [WithReplica], [WithLogger], [WithClock] (a [Clock] of [Timer] values;
// [RealClock]), [WithTickLeaseTTL], [WithMaxClockSkew], [WithMasterTimeout],
// [WithFollowerDelay], [WithRecordMargin], [WithDispatchParallelism],
// [WithLeader], [WithDispatchObserver] and [WithTracerProvider]. [Stats]
// counts what it did; [BackfillResult] is what a backfill did.
//
// Schedules, from package schedule: [Schedule], [ScheduleFunc], [Tick],
// [Catchup] ([CatchupSkip], [CatchupLatest], [CatchupAll]), [ParseSchedule],
// [Once], [Window], [Ticks], [ShortestInterval] and [Jitter].
//
// Keys on the lock masters: [TickKey], [PauseKey]. Errors:
// [ErrAlreadyDispatched], [ErrJobDone] and [ErrLeftToOthers] from a
// Dispatcher, [ErrBackfillRunning] from a backfill.
package scheduler
