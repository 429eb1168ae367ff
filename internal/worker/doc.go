// Package worker runs baton's jobs: the asynq worker that takes the tasks
// internal/handoff enqueued (and the local-mode runs it hands over in
// process), checks each, and runs it under its job's concurrency policy and,
// unless the policy is allow, under the job's execution lease on the lock
// masters (G2, G3). It writes what each run did to the run history.
//
// # A task's way, in file order
//
// worker.go is the Worker: New makes it, Start starts asynq's server (and,
// before it, the roster heartbeat and the replace-request subscription),
// Shutdown stops fetching, lets runs finish within worker.shutdown_grace
// and cancels the rest. process is asynq's handler of a baton:run task;
// RunLocal starts a local-mode run. Both end in runTick.
//
// routing.go is the rolling deploy: a task of a job that is not in this
// replica's list in cron mode goes back to its queue for a replica that
// runs it (ErrRunsElsewhere: asynq counts no attempt), or is archived when
// no live replica does. The roster decides who runs what (roster.Runs), the
// same rule the hand-off's queue binding and a reload's drain ask.
//
// admit.go checks the task itself, before anything is read from Redis:
// the payload parses and carries this deployment's namespace, its
// signature is one of security.signing_keys (handoff.Signer), its run id
// has the shape of one, its queue is the one its payload names (asynq
// dedupes task IDs per queue), and its tick is due by this worker's clock
// (a tick from the future waits: errNotDue). A task that fails is refused
// (ErrRefused, archived, never run) and counted by reason. Then it decides
// whether the tick may still run: its task has not expired
// (handoff.TickBound, or the expiry signed into the payload), its ledger
// record on the queue Redis does not say it ended already (a copy of a task
// put back by someone with write access is refused there), the job is not
// paused (the config, or a majority of the lock masters' pause flags), and
// no max_runs limit is reached. A task that ends for good writes the tick's
// ledger record (markDone), so its copies are refused.
//
// execute.go is the run: runTick builds the Run, asks the job's policy for
// a grant (policy.go: one type per concurrency, chosen once per job), then
// execute runs the job through the executor under the grant's lease, with
// the job's timeout, and records how it ended in the run history. The
// engine there is what the runs share (the runs in progress, to stop
// them). The policies are:
//
//   - forbid (policy.go, the default): a tick that finds the job running
//     is skipped; an attempt of the same tick waits for its earlier attempt
//     (lease.go, takeOrMeet, shared with replace);
//   - replace.go: a newer tick asks the holder to stop (cancel.go carries
//     the request over pub/sub, signed), waits for the lease, and runs; an
//     older tick never replaces a newer one;
//   - allow.go: no lease; each run takes a fencing token from a momentary
//     lease;
//   - buffer.go: a tick that finds the job running waits in the job's
//     buffer on the queue Redis (lua/buffer.lua), oldest first, and is
//     passed the lease when the run before it ends; ticks beyond the bound
//     are dropped.
//
// lease.go takes and releases the execution lease for forbid and replace,
// and keeps the record of who holds it (tick, run, attempt, replica), which
// forbid and replace read to decide and which `baton status` shows.
//
// outputtail.go and stats.go are what a run leaves behind besides its
// history: the masked tail of a failed run's output, and the counters of
// Stats and the metrics.
//
// asynq.go is what asynq's server is given: the retry delays (the job's
// retry_backoff doubling, handoff.BackoffDelay), the error handler that
// logs what asynq does next, a logger, and a client whose cancel
// subscription is moved off the channel every asynq server on the Redis
// shares. keys.go builds every key and channel the worker uses.
package worker
