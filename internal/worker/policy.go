package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// This file holds the concurrency policy's contract: how a run of a job
// meets another run of the same job, cluster-wide. Each policy is one type,
// chosen once per job when the worker is made (policyFor): forbidPolicy
// (forbid.go), allowPolicy (allow.go), replacePolicy (replace.go) and
// bufferPolicy (buffer.go, for buffer_one and buffer_all). The run path
// (runTick, execute) calls the job's policy and never asks which it is.

// policy is how runs of one job meet: what a run takes before it starts and
// gives back after it ends.
type policy interface {
	// acquire readies attempt attempt of tick t of job to run: it returns
	// what the run holds, or nil and what the asynq handler returns (nil
	// for a tick skipped or dropped, an error otherwise), recorded in the
	// history. retries says that the caller retries failures (asynq).
	acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*grant, error)
	// release gives back what acquire took, once the run has ended; ctx
	// is the run's (it may have ended).
	release(ctx context.Context, job *config.Job, t scheduler.Tick, g *grant, log *slog.Logger)
}

// grant is what a run holds to start: the job's execution lease (nil for
// concurrency allow) and the run's fencing token, the record of its holder
// to write as the run starts (nil: none), and the lease's release to send
// with the run's end record (nil: the policy's release sends it alone).
type grant struct {
	lease    *locking.Lease
	fence    int64
	record   runlog.Also
	giveBack runlog.Also
	hold     *tickHold // concurrency allow: the attempt's hold of its tick (nil: none)
	slot     *heldSlot // the slot of the job's limit (nil: it names none)
	// waited: the run got the job's lease after waiting for another run of
	// the job on purpose (a kept tick of a buffering job, a replacing
	// tick): its wait for a slot counts from now (slotWait)
	waited bool
}

// policyFor is the policy of job's runs on e: its concurrency's, within
// its limit if it names one (limitedPolicy).
func policyFor(e *engine, job *config.Job) policy {
	return limitedFor(e, job, concurrencyPolicy(e, job))
}

// concurrencyPolicy is the policy of job's concurrency. It is the one place
// that looks at the kind; config validation rejects any other.
func concurrencyPolicy(e *engine, job *config.Job) policy {
	switch job.Concurrency {
	case config.ConcurrencyAllow:
		return allowPolicy{e}
	case config.ConcurrencyReplace:
		return replacePolicy{e}
	case config.ConcurrencyBufferOne, config.ConcurrencyBufferAll:
		return bufferPolicy{e}
	}
	return forbidPolicy{e}
}

// concurrencyOf is the job's concurrency policy within p: p itself, or
// the policy a limit wraps (limitedPolicy).
func concurrencyOf(p policy) policy {
	if l, ok := p.(limitedPolicy); ok {
		return l.policy
	}
	return p
}

// choosePolicies chooses the policy of each job of the config, once.
func (e *engine) choosePolicies() {
	e.policies = make(map[string]policy, len(e.cfg.Jobs))
	for i := range e.cfg.Jobs {
		e.policies[e.cfg.Jobs[i].Name] = policyFor(e, &e.cfg.Jobs[i])
	}
}

// policyOf is job's policy: the one chosen for it when the worker was made,
// or, for a job the config does not hold, its concurrency's.
func (e *engine) policyOf(job *config.Job) policy {
	if p, ok := e.policies[job.Name]; ok {
		return p
	}
	return policyFor(e, job)
}

// forbidPolicy is concurrency forbid (the default): a tick that finds the
// job running is skipped. The execution lease keeps runs apart (G2).
type forbidPolicy struct{ e *engine }

// acquire takes the job's lease, or skips the tick when another run holds
// it (unless that run is an earlier attempt of the same tick: see
// meetSameTick). A retry of a tick older than the job's latest due one is
// skipped too: that tick's own run takes the job, and the stale retry
// (asynq's, after a failure or a dead worker's lease) would displace it.
func (p forbidPolicy) acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*grant, error) {
	if newer, ok := p.e.staleRetry(ctx, job, t, attempt); ok {
		p.e.skipStale(ctx, job, t, attempt, newer, log)
		return nil, nil
	}
	g, b, done, err := p.e.takeOrMeet(ctx, job, t, attempt, retries, log)
	if done {
		return p.e.givenBackWithEnd(g, job, log), err
	}
	p.e.skipBusy(ctx, job, t, attempt, b, log)
	return nil, nil
}

// release releases the lease, unless the run's end record took it back
// already (givenBackWithEnd).
func (p forbidPolicy) release(ctx context.Context, job *config.Job, _ scheduler.Tick, g *grant, log *slog.Logger) {
	ctx, cancel := releaseContext(ctx, job)
	defer cancel()
	releaseLease(ctx, g.lease, log)
}

// staleRetry tells whether attempt (> 1: a retry) of tick t comes after a
// newer tick of the job that took the job (its history has one dispatched,
// running or run): it returns that tick. A newer tick that was not run
// (skipped, most often because t's earlier attempt held the job; dropped,
// missed, paused, refused) took nothing: the retry runs, or the job would
// have run neither tick. A manual or backfilled tick is never stale, nor
// made stale by one (they are not on the schedule's course); nor is a
// retry whose job's history cannot be read or is not kept.
func (e *engine) staleRetry(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int) (time.Time, bool) {
	if attempt <= 1 || t.Manual || t.Backfill || e.rdb == nil {
		return time.Time{}, false
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	recs, err := history.Read(rctx, e.rdb, e.cfg.Namespace, job.Name, staleScan)
	if err != nil {
		return time.Time{}, false
	}
	for _, r := range recs {
		if !r.Manual && !r.Backfill && r.Tick.After(t.At) && tookTheJob(r.Status) {
			return r.Tick, true
		}
	}
	return time.Time{}, false
}

// tookTheJob tells whether a tick whose record has status s took the job
// (or will: dispatched), as a retry of an older tick would displace it.
func tookTheJob(s jobs.Status) bool {
	switch s {
	case jobs.StatusSkipped, jobs.StatusDropped, jobs.StatusMissed, jobs.StatusPaused, jobs.StatusRefused:
		return false
	}
	return true
}

// staleScan is how many of a job's newest history records a retry reads
// for a newer tick.
const staleScan = 8
