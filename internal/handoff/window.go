package handoff

import (
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/scheduler"
)

// How long a task may live: the window its expiry is signed with, and
// the retry delays it spans.

// AttemptSlack is what an attempt may take beyond its task timeout before
// the next one starts, or before a task fetched late starts at all: asynq's
// 30 s task lease plus its one-minute recovery scan after a worker died
// mid-run, the retry poll, and hand-backs between replicas during a rolling
// deploy.
const AttemptSlack = 2 * time.Minute

// RunWindow is how long after its dispatch a task's last attempt may still
// start legitimately, for job j:
//
//	2 x max_clock_skew                                       (the dispatcher's and the worker's clocks)
//	+ sum of BackoffDelay(retry_backoff, n), n = 0 .. max_retry-1   (the retry delays)
//	+ (max_retry + 1) x (task timeout + AttemptSlack + worker.shutdown_grace)
//
// where the task timeout is the asynq timeout NewRunTask gives the task
// (the job's timeout in whole seconds, times buffer bound + 1 for a
// buffering job). Each attempt may run to its timeout, wait through a
// shutdown's grace (asynq requeues the task without spending an attempt)
// and be picked up late by asynq's recovery; then it fails and the next
// one waits its backoff. A job without a timeout has no bound (the ledger
// record still refuses a replay of a tick that ended).
func RunWindow(cfg *config.Config, j *config.Job) time.Duration {
	const never = time.Duration(1<<63 - 1)
	attempt := min(TaskTimeout(j.Timeout)*time.Duration(j.BufferBound()+1), NoTimeout)
	if attempt >= NoTimeout {
		return never
	}
	d := 2*cfg.MaxClockSkew + time.Duration(j.MaxRetry+1)*(attempt+AttemptSlack+cfg.Worker.ShutdownGrace)
	for n := range j.MaxRetry {
		d += BackoffDelay(j.RetryBackoff, n)
		if d > 100*365*24*time.Hour {
			return never
		}
	}
	return d
}

// TickBound is how long after its tick a scheduled task may still start
// (any attempt): the job's starting deadline (the latest dispatch) plus
// RunWindow. A task of an older tick is refused as a replay.
func TickBound(cfg *config.Config, j *config.Job) time.Duration {
	w := RunWindow(cfg, j)
	if w > time.Duration(1<<63-1)-j.StartingDeadline {
		return w
	}
	return j.StartingDeadline + w
}

// TaskExpiry is the expiry NewRunTask signs into tick t's task dispatched
// at now: the later of the tick and now, plus RunWindow (unix ms; 0: none).
// For a tick dispatched on time it is at most tickBound after the tick; a
// backfill or a trigger, dispatched later than its tick, gets its full
// window from its dispatch.
func TaskExpiry(cfg *config.Config, j *config.Job, t scheduler.Tick, now time.Time) int64 {
	w := RunWindow(cfg, j)
	if w >= 100*365*24*time.Hour {
		return 0
	}
	base := now
	if t.At.After(now) {
		base = t.At
	}
	return base.Add(w).UnixMilli()
}

// maxRetryDelay caps the delay before a retry (unless the job's retry_backoff
// alone is longer).
const maxRetryDelay = time.Hour

// BackoffDelay is the delay before retry n+1 of a job (n retries so far):
// backoff * 2^n, capped at maxRetryDelay or at backoff if that is longer.
// A zero backoff retries at once. asynq moves a due retry back to its queue
// at the worker's next retry poll (see worker.WithPollIntervals), so the actual
// delay is up to that much longer.
func BackoffDelay(backoff time.Duration, n int) time.Duration {
	if backoff <= 0 {
		return 0
	}
	limit := max(backoff, maxRetryDelay)
	d := backoff
	for range max(n, 0) {
		if d >= limit/2 {
			return limit
		}
		d *= 2
	}
	return d
}
