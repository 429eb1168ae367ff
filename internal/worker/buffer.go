package worker

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// This file holds the buffering policies (concurrency buffer_one and
// buffer_all): a tick that finds the job running is kept and runs when the
// run ends, oldest first; beyond the bound (1, or buffer_max) it is dropped
// and recorded so.
//
// Redis names (on the queue Redis, beside the holder record):
//
//	NS:{exec:<job>}:buffer        sorted set of the kept ticks' IDs, by tick
//	NS:{exec:<job>}:buffer:alive  hash: kept tick ID -> liveness deadline
//	                              (Redis TIME, ms), renewed every lock_ttl/3
//	                              by the waiting run
//	NS:{exec:<job>}:buffer:next   the kept tick the lease is being handed
//	                              to: written by a run that gives the lease
//	                              up while ticks are kept, so that a tick
//	                              coming in before the successor starts
//	                              does not find the buffer full
//
// The execution lease alone keeps runs apart (G2); the buffer decides which
// ticks wait and in which order. A kept tick's task waits in its worker
// (holding one of the worker's slots) until it is the oldest kept tick, then
// waits for the lease like any waiter and is woken by the release. A run
// that takes the free lease while older ticks are kept gives it back and
// queues behind them. A waiter whose worker dies stops renewing its entry
// and is dropped from the buffer after lock_ttl, so the ticks behind it move
// up; asynq retries its task later and the retry queues again (or is
// dropped, if the buffer filled meanwhile).

var (
	//go:embed lua/buffer.lua
	bufferSrc    string
	bufferScript = redis.NewScript(bufferSrc)
)

// bufferPolicy is concurrency buffer_one and buffer_all: a tick that finds
// the job running is kept (keep) and runs when the job is free, oldest
// first; beyond the job's bound it is dropped.
type bufferPolicy struct{ e *engine }

// acquire takes the job's lease if it is free and no older tick is kept
// (first); otherwise the tick is kept and waits its turn, or is dropped.
func (p bufferPolicy) acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*grant, error) {
	e := p.e
	lease, busy, err := e.tryLease(ctx, job, t, attempt, log)
	switch {
	case lease != nil && e.first(ctx, job, t, lease, log):
		return e.held(ctx, job, t, attempt, lease, log), nil
	case lease != nil:
		// older ticks are kept: first released the lease and kept this
		// tick behind them (or found the buffer full), and it waits
		return p.wait(ctx, job, t, attempt, slog.String("holder", "none (the lease goes to an older kept tick)"), log)
	case !busy:
		return nil, err
	}
	b := e.seeHolder(ctx, job.Name, log)
	if b.sameTick(t) {
		return e.meetSameTick(ctx, job, t, attempt, retries, b, log)
	}
	return p.wait(ctx, job, t, attempt, b.attr(), log)
}

// wait keeps tick t in the job's buffer until it is its turn to run.
func (p bufferPolicy) wait(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, holder slog.Attr, log *slog.Logger) (*grant, error) {
	lease, done, err := p.e.keep(ctx, job, t, attempt, holder, log)
	if done {
		return nil, err // dropped (nil), or the buffer could not be written
	}
	g, err := p.e.obtained(ctx, job, t, attempt, lease, err, log)
	if g != nil {
		g.waited = true
	}
	return g, err
}

// release marks the next kept tick (markNext) and releases the lease. The
// mark is made only while this run holds the lease: once it is lost,
// another run may hold it, and the mark would be false.
func (p bufferPolicy) release(ctx context.Context, job *config.Job, t scheduler.Tick, g *grant, log *slog.Logger) {
	ctx, cancel := releaseContext(ctx, job)
	defer cancel()
	if g.lease.Context().Err() == nil {
		p.e.markNext(ctx, job, t, log)
	}
	releaseLease(ctx, g.lease, log)
}

// buffer is one job's buffer on the queue Redis.
type buffer struct {
	rdb   redis.UniversalClient
	keys  []string
	ttl   time.Duration // liveness of an entry: the job's lock_ttl
	bound int
}

func (e *engine) buffer(job *config.Job) *buffer {
	return &buffer{rdb: e.rdb, keys: bufferKeys(e.cfg.Namespace, job.Name), ttl: job.LockTTL, bound: job.BufferBound()}
}

func (b *buffer) call(ctx context.Context, op string, t scheduler.Tick) (int64, error) {
	return bufferScript.Run(ctx, b.rdb, b.keys, op, t.ID(), t.At.UnixMilli(), b.ttl.Milliseconds(), b.bound).Int64()
}

// first reports whether tick t, whose run just took the job's lease, may
// keep it: no older tick is kept (then t's own entry, if kept, is removed,
// in the same call). Otherwise it releases the lease. When the buffer
// cannot be read the run goes ahead: order is advice, the lease is safety.
func (e *engine) first(ctx context.Context, job *config.Job, t scheduler.Tick, lease *locking.Lease, log *slog.Logger) bool {
	older, err := e.buffer(job).call(ctx, "first", t)
	if err != nil {
		log.Warn("cannot read the job's buffer; running without looking at kept ticks", slog.Any("error", err))
		return true
	}
	if older == 0 {
		return true
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), job.LockTTL)
	defer cancel()
	if err := lease.Release(rctx); err != nil && !errors.Is(err, locking.ErrNotHeld) {
		log.Warn("cannot release the execution lease (it expires at its ttl)", slog.Any("error", err))
	}
	log.Info("older ticks are kept: queueing behind them", slog.Int64("kept_before", older))
	return false
}

// markNext marks, in the job's buffer, the oldest kept tick as the one the
// lease of tick t's run goes to next, as the run is about to give the lease
// up: until that tick starts it does not count towards the bound. Best
// effort: without the mark a tick coming in at that instant may be dropped.
func (e *engine) markNext(ctx context.Context, job *config.Job, t scheduler.Tick, log *slog.Logger) {
	// bounded well below lock_ttl: a slow queue Redis must not hold the
	// release back
	ctx, cancel := context.WithTimeout(ctx, job.LockTTL/3)
	defer cancel()
	if _, err := e.buffer(job).call(ctx, "mark_next", t); err != nil {
		log.Warn("cannot mark the next kept tick in the job's buffer", slog.Any("error", err))
	}
}

// keep keeps tick t in the job's buffer and waits until it is the oldest kept
// tick and the lease is free. It returns the lease; or done and what the
// handler returns when the tick is dropped (the buffer is full: nil) or the
// buffer cannot be written (an error); or the lock's error when ctx ended,
// for the caller to record.
func (e *engine) keep(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, holder slog.Attr, log *slog.Logger) (lease *locking.Lease, done bool, err error) {
	b := e.buffer(job)
	rank, err := b.call(ctx, "join", t)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, false, err
	case err != nil:
		e.count(t.Job, func(c *counters) { c.failed.Add(1) })
		log.Error("cannot keep the tick in the job's buffer", slog.Any("error", err))
		e.notStarted(ctx, job, t, attempt, jobs.StatusFailed, "cannot keep the tick in the job's buffer: "+err.Error())
		return nil, true, fmt.Errorf("worker: %s: buffer: %w", t.ID(), err)
	case rank < 0:
		e.count(t.Job, func(c *counters) { c.dropped.Add(1) })
		reason := fmt.Sprintf("dropped: the job runs and its buffer is full (%d kept)", b.bound)
		log.Info(reason, holder)
		e.notStarted(ctx, job, t, attempt, jobs.StatusDropped, reason+"; running: "+holderValue(holder))
		return nil, true, nil
	}
	log.Info("kept: runs when the job is free", holder, slog.Int64("kept_before", rank))

	// the entry lives while this run beats for it; once the run has the
	// lease (first removed the entry) a beat must not put it back
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	running := false
	wg.Go(func() {
		clock.Every(wctx.Done(), e.clock, b.ttl/3, func() {
			mu.Lock()
			defer mu.Unlock()
			if running {
				return
			}
			if ok, err := b.call(wctx, "beat", t); err == nil && ok == 0 {
				// dropped as dead (this worker stalled past lock_ttl):
				// back in its place, beyond the bound if need be
				if _, err := b.call(wctx, "rejoin", t); err != nil && wctx.Err() == nil {
					log.Warn("cannot keep the tick in the job's buffer", slog.Any("error", err))
				}
			}
		})
	})
	defer func() {
		stop()
		wg.Wait()
		// running now, or given up: either way no longer kept
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.ttl)
		defer cancel()
		if _, err := b.call(lctx, "leave", t); err != nil {
			log.Warn("cannot remove the tick from the job's buffer (its entry lapses in lock_ttl)", slog.Any("error", err))
		}
	}()

	// the next in line looks often: it moves up the moment the oldest
	// starts, and then waits on the lease, woken by the release; the
	// others need only keep their place
	poll := func() time.Duration {
		if rank == 1 {
			return min(b.ttl/3, 50*time.Millisecond)
		}
		return min(b.ttl/3, 500*time.Millisecond)
	}
	for {
		if rank < 0 {
			// dropped from the buffer while this run stalled (or the
			// buffer was lost with the queue Redis): back in its place
			if r, err := b.call(ctx, "rejoin", t); err == nil {
				rank = r
			} else if ctx.Err() == nil {
				log.Warn("cannot keep the tick in the job's buffer; waiting for the lease without it", slog.Any("error", err))
				rank = 0
			}
		}
		if rank == 0 {
			// the oldest kept tick: wait for the lease
			lease, err = e.locks.Lock(ctx, locknames.Exec(job.Name), job.LockTTL)
			if err != nil {
				return nil, false, err
			}
			mu.Lock()
			running = e.first(ctx, job, t, lease, log)
			mu.Unlock()
			if running {
				return lease, false, nil
			}
			// an older tick was kept while this one waited: it goes
			// first (first released the lease); look again after a poll
			rank = 1
		}
		tm := e.clock.NewTimer(poll())
		select {
		case <-ctx.Done():
			tm.Stop()
			return nil, false, context.Cause(ctx)
		case <-tm.C():
		}
		if r, err := b.call(ctx, "rank", t); err == nil {
			rank = r
		} else if ctx.Err() == nil {
			log.Warn("cannot read the job's buffer", slog.Any("error", err))
		}
	}
}

// holderValue is the text of a holder attribute.
func holderValue(a slog.Attr) string { return a.Value.String() }
