package worker

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// This file holds the worker's part of chains (config after:): a tick of
// a chained job waits, handed back to the queue without spending an
// attempt, until each of its parents with a tick at that instant ended it
// for good (internal/chain's outcome records); then it runs, or is
// skipped naming the parent that did not succeed (on_parent_failure:
// skip). And every tick of a job that others run after records its
// outcome where its task ends for good.

// errWaitingForParents hands a chained tick's task back while a parent's
// tick has not ended: no attempt is spent (ErrRunsElsewhere), and it comes
// back after parentPoll.
var errWaitingForParents = fmt.Errorf("waiting for its parents' ticks: %w", ErrRunsElsewhere)

// parentPoll is how long a chained tick's task waits before it looks at
// its parents again: a second at first, longer as the tick ages (a
// twentieth of its age), at most 15 s.
func parentPoll(age time.Duration) time.Duration {
	return min(max(age/20, time.Second), 15*time.Second)
}

// runEnd is how a run (or a tick the worker did not run) ended, as the
// history records it: what the outcome record of a parent's tick says.
type runEnd struct {
	mu  sync.Mutex
	o   chain.Outcome
	set bool
}

type runEndKey struct{}

// withRunEnd gives ctx a runEnd for the history's records to fill.
func withRunEnd(ctx context.Context) (context.Context, *runEnd) {
	e := &runEnd{}
	return context.WithValue(ctx, runEndKey{}, e), e
}

// noteEnd keeps st and reason in ctx's runEnd, if it has one: the last
// record of the attempt says how it ended.
func noteEnd(ctx context.Context, st jobs.Status, reason string) {
	if e, ok := ctx.Value(runEndKey{}).(*runEnd); ok {
		e.mu.Lock()
		e.o, e.set = chain.Outcome{Status: st, Reason: reason}, true
		e.mu.Unlock()
	}
}

// outcome is the end kept, and whether there is one.
func (e *runEnd) outcome() (chain.Outcome, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.o, e.set
}

// outcomeWrite is the outcome record of a successful run, written in the
// round trip of its end (beside the ledger record), for a job that others
// run after.
type outcomeWrite struct {
	e       *engine
	t       scheduler.Tick
	written bool
}

func (o *outcomeWrite) also(ctx context.Context, p redis.Pipeliner) func() {
	if o.e.cfg.OutcomeTTL(o.t.Job) <= 0 {
		o.written = true // none is needed
		return nil
	}
	cmd := chain.Write(ctx, p, o.e.cfg, o.t.Job, o.t.At, chain.Outcome{Status: jobs.StatusOK})
	return func() { o.written = cmd.Err() == nil }
}

// recordOutcome writes the outcome record of tick t, whose task ended for
// good as end says, for a job that others run after (unless ow wrote it
// with the run's end already).
func (e *engine) recordOutcome(ctx context.Context, t scheduler.Tick, end *runEnd, ow *outcomeWrite) {
	if e.cfg.OutcomeTTL(t.Job) <= 0 || ow != nil && ow.written {
		return
	}
	o, ok := end.outcome()
	if !ok {
		o = chain.Outcome{Status: jobs.StatusFailed, Reason: "its end was not recorded"}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	if err := chain.Record(ctx, e.rdb, e.cfg, t.Job, t.At, o); err != nil {
		e.log.Warn("cannot write the tick's outcome record: the jobs run after it wait for it until their starting deadline",
			append(handoff.TickAttrs(t), slog.Any("error", err))...)
	}
}

// awaitParents decides whether tick t of chained job runs now: every
// parent with a tick at t.At ended it (each succeeded, or on_parent_failure
// is run) lets it run (done false); a parent still running hands the task
// back (errWaitingForParents), until the tick's starting deadline, after
// which the tick is skipped, as it is when a parent did not succeed
// (on_parent_failure: skip). A skip is recorded in the history (done true,
// nil: the task ends). A manual or backfilled tick runs without waiting.
func (w *Worker) awaitParents(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int) (done bool, err error) {
	if len(job.After) == 0 || t.Manual || t.Backfill {
		return false, nil
	}
	parents := w.cfg.ParentsAt(job, t.At)
	names := make([]string, len(parents))
	for i, p := range parents {
		names[i] = p.Name
	}
	rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	outs, err := chain.Read(rctx, w.rdb, w.cfg.Namespace, names, t.At)
	cancel()
	if err != nil {
		return true, fmt.Errorf("worker: %s: %w (%w)", t.ID(), errWaitingForParents, err)
	}
	var waiting, failed []string
	for _, n := range names {
		o, ok := outs[n]
		switch {
		case !ok:
			waiting = append(waiting, n+"@"+t.At.UTC().Format(time.RFC3339))
		case !o.OK():
			why := fmt.Sprintf("%s@%s %s", n, t.At.UTC().Format(time.RFC3339), o.Status)
			if o.Reason != "" {
				why += ": " + o.Reason
			}
			failed = append(failed, why)
		}
	}
	log := w.log.With(handoff.TickAttrs(t)...)
	switch {
	case len(waiting) > 0 && w.clock.Now().Before(t.At.Add(job.StartingDeadline)):
		return true, fmt.Errorf("worker: %s: waiting for %s: %w", t.ID(), strings.Join(waiting, ", "), errWaitingForParents)
	case len(waiting) > 0:
		why := fmt.Sprintf("its parents did not end their ticks within its starting_deadline (%s): %s", job.StartingDeadline, strings.Join(waiting, ", "))
		w.count(t.Job, func(c *counters) { c.skipped.Add(1) })
		log.Warn("skipped: " + why)
		w.notStarted(ctx, job, t, attempt, jobs.StatusSkipped, why)
		return true, nil
	case len(failed) > 0 && job.OnParentFailure != config.ParentFailureRun:
		why := strings.Join(failed, "; ")
		w.count(t.Job, func(c *counters) { c.skipped.Add(1) })
		log.Info("skipped: a parent's tick did not succeed (on_parent_failure: skip)", slog.String("parents", why))
		w.notStarted(ctx, job, t, attempt, jobs.StatusSkipped, why)
		return true, nil
	case len(failed) > 0:
		log.Info("running after a parent's tick that did not succeed (on_parent_failure: run)", slog.String("parents", strings.Join(failed, "; ")))
	}
	return false, nil
}
