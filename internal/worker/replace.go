package worker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// ErrReplaced ends a run of a replace-policy job, running or still waiting
// for the job's lease, when a newer tick of the job asks for the job. Such a
// run is recorded as replaced and not retried (the asynq handler returns it
// wrapped with asynq.SkipRetry).
var ErrReplaced = errors.New("worker: replaced by a newer tick")

// replacePolicy is concurrency replace: a newer tick stops the job's run of
// an older one and runs once its lease is free; an older tick never runs
// after a newer one (it is skipped). The lease keeps runs apart (G2): the
// replaced run ends before the new one starts.
type replacePolicy struct{ e *engine }

// acquire takes the job's lease; when another run holds it, a run of an
// older tick is asked to stop (replace) and the lease waited for, while a
// run of a newer tick has this one skipped.
func (p replacePolicy) acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*grant, error) {
	e := p.e
	g, b, done, err := e.takeOrMeet(ctx, job, t, attempt, retries, log)
	switch {
	case done:
		return e.givenBackWithEnd(g, job, log), err
	case b.ok && b.h.after(t.At):
		e.skipForNewer(ctx, job, t, attempt, b.h, log)
		return nil, nil
	}
	log.Info("replacing the running run", b.attr())
	var newer *newerHolder
	lease, err := e.replace(ctx, job, t, log)
	if errors.As(err, &newer) {
		e.skipForNewer(ctx, job, t, attempt, newer.h, log)
		return nil, nil
	}
	g, err = e.obtained(ctx, job, t, attempt, lease, err, log)
	if g != nil {
		g.waited = true
	}
	return e.givenBackWithEnd(g, job, log), err
}

// release releases the lease, unless the run's end record took it back
// already (givenBackWithEnd).
func (p replacePolicy) release(ctx context.Context, job *config.Job, _ scheduler.Tick, g *grant, log *slog.Logger) {
	ctx, cancel := releaseContext(ctx, job)
	defer cancel()
	releaseLease(ctx, g.lease, log)
}

// replace asks every worker to stop the job's runs of older ticks, then waits
// for the lease. The request is repeated every lock_ttl/3 while waiting,
// because pub/sub delivers at most once (a worker reconnecting misses it).
func (e *engine) replace(ctx context.Context, job *config.Job, t scheduler.Tick, log *slog.Logger) (*locking.Lease, error) {
	msg, _ := json.Marshal(cancelRequest{V: formats.CancelRequest, ID: t.ID(), Tick: t.At.UTC().Format(time.RFC3339Nano), Replica: e.replica})
	ch := cancelChannel(e.cfg.Namespace, job.Name)
	msg = e.signer().Sign(handoff.DomainCancel+"\x00"+ch, msg)
	publish := func() {
		if err := e.rdb.Publish(ctx, ch, msg).Err(); err != nil && ctx.Err() == nil {
			log.Warn("cannot publish the replace request", slog.Any("error", err))
		}
	}
	publish()
	// the wait ends when the holder record shows a newer tick (read again
	// at each publish): the run that holds the lease may have taken it
	// after this tick read no record, and an older tick must not wait to
	// run after it
	lockCtx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	waitCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		clock.Every(waitCtx.Done(), e.clock, job.LockTTL/3, func() {
			if h, ok := e.readHolder(waitCtx, job.Name, log); ok && h.after(t.At) {
				giveUp(&newerHolder{h})
				return
			}
			publish()
		})
	})
	lease, err := e.locks.Lock(lockCtx, locknames.Exec(job.Name), job.LockTTL)
	stop()
	wg.Wait()
	var newer *newerHolder
	if err != nil && ctx.Err() == nil && errors.As(context.Cause(lockCtx), &newer) {
		return nil, newer
	}
	return lease, err
}

// skipForNewer records tick t skipped because h, a newer tick's run, holds
// the job (concurrency replace): an older tick never runs after a newer one.
func (e *engine) skipForNewer(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, h holderRecord, log *slog.Logger) {
	e.count(t.Job, func(c *counters) { c.skipped.Add(1) })
	log.Info("skipped: a newer tick holds the job", slog.String("holder", h.String()))
	e.notStarted(ctx, job, t, attempt, jobs.StatusSkipped, "a newer tick holds the job: "+h.String())
}

// newerHolder ends replace's wait: the holder record, written just after
// the lease was taken and so possibly missing when the waiter first read
// it, shows a newer tick's run.
type newerHolder struct{ h holderRecord }

func (n *newerHolder) Error() string { return "worker: a newer tick holds the job: " + n.h.String() }
