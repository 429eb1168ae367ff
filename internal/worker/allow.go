package worker

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// allowPolicy is concurrency allow: runs of the job overlap freely. A run
// holds no lease, only a fencing token.
type allowPolicy struct{ e *engine }

// acquire gives the run its fence. A queued run's tick came through Redis:
// its fence comes from the lock masters (allowFence), like every run's; a
// local run's came from them through the claim, in this process.
func (p allowPolicy) acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*grant, error) {
	if !retries {
		return &grant{fence: t.Fence}, nil
	}
	f, err := p.e.allowFence(ctx, job, log)
	if err != nil {
		p.e.notStarted(ctx, job, t, attempt, jobs.StatusFailed, err.Error())
		return nil, err
	}
	return &grant{fence: f}, nil
}

// release has nothing to give back.
func (allowPolicy) release(context.Context, *config.Job, scheduler.Tick, *grant, *slog.Logger) {}

// fenceLockTTL is the ttl of the momentary lease an allow run takes for its
// fence.
const fenceLockTTL = 2 * time.Second

// allowFence returns a fencing token for a run of an allow job, which runs
// without the execution lease: the fence of a momentary lease on
// "fence:JOB", taken (waiting for a concurrent run's) and released at once.
// The lock masters issue it, so fences grow in the order runs start and no
// payload decides one.
func (e *engine) allowFence(ctx context.Context, job *config.Job, log *slog.Logger) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, max(job.LockTTL, 10*time.Second))
	defer cancel()
	// masters out of reach for a moment (a blip, a failover) are waited
	// for, as a run of a lease-holding job waits for its lease
	lease, err := e.locks.Lock(lctx, locknames.Fence(job.Name), fenceLockTTL)
	for backoff := 100 * time.Millisecond; err != nil && lctx.Err() == nil; backoff = min(2*backoff, time.Second) {
		t := e.clock.NewTimer(backoff)
		select {
		case <-lctx.Done():
		case <-t.C():
			lease, err = e.locks.Lock(lctx, locknames.Fence(job.Name), fenceLockTTL)
		}
		t.Stop()
	}
	if err != nil {
		e.count(job.Name, func(c *counters) { c.failed.Add(1) })
		log.Error("cannot take a fencing token from the lock masters", slog.Any("error", err))
		return 0, fmt.Errorf("jobs: job %q: fencing token: %w", job.Name, err)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), fenceLockTTL)
	_ = lease.Release(rctx) // it expires within fenceLockTTL anyway
	rcancel()
	return lease.Fence(), nil
}
