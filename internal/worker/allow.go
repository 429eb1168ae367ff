package worker

import (
	"context"
	"crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/locknames"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// allowPolicy is concurrency allow: runs of the job overlap freely. A run
// holds no lease, only a fencing token; a queued attempt also holds its
// tick's ledger record while it runs (holdTick), so that a copy of its task
// put back into the queue meanwhile does not run the tick a second time.
type allowPolicy struct{ e *engine }

// acquire gives the run its fence. A queued run's tick came through Redis:
// its fence comes from the lock masters (allowFence), like every run's; a
// local run's came from them through the claim, in this process. A queued
// attempt then holds its tick (holdTick): a tick another attempt holds is
// handed back (it runs once that attempt's hold ends, or is refused as done
// once it ended for good), one whose task ended already is refused.
func (p allowPolicy) acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*grant, error) {
	if !retries {
		return &grant{fence: t.Fence}, nil
	}
	hold, other, err := p.e.holdTick(ctx, t, log)
	switch {
	case err != nil:
		return nil, err
	case strings.HasPrefix(other, doneMarker):
		why := "its tick's task ended already (ledger record " + strconv.Quote(truncate(other, 80)) + "): a copy of it put back into the queue"
		p.e.notStarted(ctx, job, t, attempt, jobs.StatusRefused, why)
		return nil, fmt.Errorf("%w: %s: %s: %w", ErrRefused, t.ID(), why, asynq.SkipRetry)
	case other != "":
		// another attempt of the tick runs: this copy waits for it (said
		// once per job: a copy is handed back every second until then)
		if _, logged := p.e.heldBack.LoadOrStore(job.Name, true); !logged {
			log.Warn("another attempt of this tick runs: handing its copy back until that attempt's hold ends (a copy of a running task put back into the queue; later ones of this job are not logged)",
				slog.String("holder", truncate(other, 80)))
		}
		return nil, fmt.Errorf("worker: %s: another attempt of the tick runs (%s): %w", t.ID(), truncate(other, 80), ErrRunsElsewhere)
	}
	f, err := p.e.allowFence(ctx, job, log)
	if err != nil {
		hold.end(ctx)
		p.e.notStarted(ctx, job, t, attempt, jobs.StatusFailed, err.Error())
		return nil, err
	}
	return &grant{fence: f, hold: hold}, nil
}

// release ends the attempt's hold of its tick, if any.
func (allowPolicy) release(ctx context.Context, _ *config.Job, _ scheduler.Tick, g *grant, _ *slog.Logger) {
	g.hold.end(ctx)
}

var (
	//go:embed lua/tickhold.lua
	tickHoldSrc    string
	tickHoldScript = redis.NewScript(tickHoldSrc)
)

// runningMarker starts a ledger record that says an attempt of the tick
// runs: "running:<token>", the token the attempt's own. Readers that know
// only doneMarker read it as not done, as they read no record.
const runningMarker = "running"

// The hold of a tick: how long its record lives unless kept (runningTTL),
// how often the attempt keeps it (runningKeep), and how long it lingers
// after the attempt ended (runningLinger): long enough for the end's
// "done" record, or for the handler's, to replace it (a copy fetched in
// between is handed back, not run), short enough that a retry after a
// failed attempt is not held back for long. A worker that dies leaves the
// record to expire within runningTTL, well before asynq gives its task to
// another worker (asynq's lease, 30s, ends first).
const (
	runningTTL    = 10 * time.Second
	runningKeep   = runningTTL / 3
	runningLinger = time.Second
)

// tickHold is an attempt's hold of its tick's ledger record, kept alive by
// a goroutine until end. A nil *tickHold holds nothing.
type tickHold struct {
	e     *engine
	key   string
	value string
	stop  chan struct{}
	done  sync.WaitGroup
}

// holdTick writes tick t's ledger record "running:<token>" unless it has
// a value: it returns the hold, or the value the record has (other). A
// queue Redis that does not answer is logged and the attempt runs without
// a hold (as the admission's read of the record does); err is a context
// that ended.
func (e *engine) holdTick(ctx context.Context, t scheduler.Tick, log *slog.Logger) (h *tickHold, other string, err error) {
	if e.rdb == nil {
		return nil, "", nil
	}
	key := tickRecordKey(e.cfg.Namespace, t)
	value := runningMarker + ":" + rand.Text()
	hctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	other, err = tickHoldScript.Run(hctx, e.rdb, []string{key}, "hold", value, runningTTL.Milliseconds()).Text()
	switch {
	case errors.Is(err, redis.Nil):
		h = &tickHold{e: e, key: key, value: value, stop: make(chan struct{})}
		h.done.Go(h.keep)
		return h, "", nil
	case err != nil && ctx.Err() != nil:
		return nil, "", fmt.Errorf("worker: %s: hold its ledger record: %w", t.ID(), context.Cause(ctx))
	case err != nil:
		log.Warn("cannot hold the tick's ledger record: running the attempt without (a copy of its task put back meanwhile is not held back)",
			slog.Any("error", err))
		return nil, "", nil
	}
	return nil, other, nil
}

// keep gives the record runningTTL more every runningKeep, until end or
// until the record holds something else.
func (h *tickHold) keep() {
	for {
		tm := h.e.clock.NewTimer(runningKeep)
		select {
		case <-h.stop:
			tm.Stop()
			return
		case <-tm.C():
		}
		ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
		n, err := tickHoldScript.Run(ctx, h.e.rdb, []string{h.key}, "keep", h.value, runningTTL.Milliseconds()).Int()
		cancel()
		if err == nil && n == 0 {
			return // replaced: done, or lost to expiry
		}
	}
}

// end stops keeping the hold and lets the record linger runningLinger
// (still this attempt's), for the end's record to replace it.
func (h *tickHold) end(ctx context.Context) {
	if h == nil {
		return
	}
	close(h.stop)
	h.done.Wait()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	_ = tickHoldScript.Run(ctx, h.e.rdb, []string{h.key}, "keep", h.value, runningLinger.Milliseconds()).Err()
}

// truncate is s cut to n bytes, with "..." when cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

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
		return 0, fmt.Errorf("worker: job %q: fencing token: %w", job.Name, err)
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), fenceLockTTL)
	_ = lease.Release(rctx) // it expires within fenceLockTTL anyway
	rcancel()
	return lease.Fence(), nil
}
