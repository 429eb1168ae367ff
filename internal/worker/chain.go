package worker

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
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
	// dup: the attempt was a duplicate of a run of its tick under way (a
	// local dispatch twice): that run's end is the tick's, not this one's
	dup bool
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

// noteDuplicate marks ctx's runEnd, if it has one, as a duplicate's: its
// end (skipped) is not its tick's.
func noteDuplicate(ctx context.Context) {
	if e, ok := ctx.Value(runEndKey{}).(*runEnd); ok {
		e.mu.Lock()
		e.dup = true
		e.mu.Unlock()
	}
}

// outcome is the end kept, and whether there is one; dup says it is a
// duplicate's, not its tick's.
func (e *runEnd) outcome() (o chain.Outcome, set, dup bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.o, e.set, e.dup
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
	ttl := handoff.OutcomeTTL(o.e.cfg, o.t.Job)
	if ttl <= 0 || o.t.Manual {
		o.written = true // none is needed (a trigger is no tick of the schedule)
		return nil
	}
	cmd := chain.Write(ctx, p, o.e.cfg.Namespace, o.t.Job, o.t.At, ttl, chain.Outcome{Status: jobs.StatusOK})
	return func() { o.written = cmd.Err() == nil }
}

// recordOutcome writes the outcome record of tick t, whose task ended for
// good as end says, for a job that others run after (unless ow wrote it
// with the run's end already). A trigger's run records none: it is no
// tick of the schedule, whose tick at the same instant (a trigger made on
// a whole second) is the one the children wait for.
func (e *engine) recordOutcome(ctx context.Context, t scheduler.Tick, end *runEnd, ow *outcomeWrite) {
	ttl := handoff.OutcomeTTL(e.cfg, t.Job)
	if ttl <= 0 || t.Manual || ow != nil && ow.written {
		return
	}
	o, ok, dup := end.outcome()
	if dup {
		return // the run under way records the tick's end
	}
	if !ok {
		o = chain.Outcome{Status: jobs.StatusFailed, Reason: "its end was not recorded"}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	if err := chain.Record(ctx, e.rdb, e.cfg.Namespace, t.Job, t.At, ttl, o); err != nil {
		e.log.Warn("cannot write the tick's outcome record: the jobs run after it wait for it until their starting deadline",
			append(handoff.TickAttrs(t), slog.Any("error", err))...)
	}
}

// awaitParents decides whether tick t of chained job runs now: every
// parent with a tick at t.At ended it (each succeeded, or on_parent_failure
// is run) lets it run (done false); a parent still running hands the task
// back (errWaitingForParents), until the tick's starting deadline, after
// which the tick is skipped, as it is when a parent did not succeed
// (on_parent_failure: skip). A tick at an instant no parent of this
// replica's job list ticks at waits for every parent. A skip is recorded
// in the history (done true, nil: the task ends). A manual tick runs
// without waiting, and so does a backfilled one, unless a chain's backfill
// dispatched it to wait for its parents until awaitUntil (its payload's
// Await): then it waits until that time instead of its starting deadline.
func (w *Worker) awaitParents(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, awaitUntil time.Time) (done bool, err error) {
	deadline, within := t.At.Add(job.StartingDeadline), fmt.Sprintf("within its starting_deadline (%s)", job.StartingDeadline)
	switch {
	case len(job.After) == 0 || t.Manual:
		return false, nil
	case t.Backfill && awaitUntil.IsZero():
		return false, nil
	case t.Backfill:
		deadline, within = awaitUntil, "by "+awaitUntil.UTC().Format(time.RFC3339)+", the wait its backfill gave it"
	}
	var names []string
	for _, p := range w.cfg.ParentsAt(job, t.At) {
		names = append(names, p.Name)
	}
	if len(names) == 0 {
		// no parent ticks at t.At by this replica's job list: the tick
		// comes from a replica whose list gives a parent another schedule
		// (a rolling deploy), which ticks then: it waits for them all
		names = job.After
	}
	// every parent's record is read: one whose schedule no longer has the
	// instant (replaced since) may have ended its tick at it, and a
	// failure it recorded stands
	rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	outs, err := chain.Read(rctx, w.rdb, w.cfg.Namespace, job.After, t.At)
	cancel()
	if err != nil {
		return true, fmt.Errorf("worker: %s: %w (%w)", t.ID(), errWaitingForParents, err)
	}
	var waiting, failed []string
	for _, n := range job.After {
		o, ok := outs[n]
		switch {
		case !ok && slices.Contains(names, n):
			waiting = append(waiting, n)
		case !ok:
		case !o.OK():
			why := fmt.Sprintf("%s@%s %s", n, t.At.UTC().Format(time.RFC3339), o.Status)
			if o.Reason != "" {
				why += ": " + o.Reason
			}
			failed = append(failed, why)
		}
	}
	if len(waiting) > 0 && !w.clock.Now().Before(deadline) {
		// at the deadline, a parent that ended its tick without an
		// outcome record (run by a replica whose copy did not know the
		// chain yet) is read from its history
		for n, o := range w.outcomesFromHistory(ctx, waiting, t.At) {
			waiting = slices.DeleteFunc(waiting, func(w string) bool { return w == n })
			if !o.OK() {
				failed = append(failed, fmt.Sprintf("%s@%s %s: %s", n, t.At.UTC().Format(time.RFC3339), o.Status, o.Reason))
			}
		}
	}
	log := w.log.With(handoff.TickAttrs(t)...)
	switch {
	case len(waiting) > 0 && w.clock.Now().Before(deadline):
		return true, fmt.Errorf("worker: %s: waiting for %s: %w", t.ID(), strings.Join(ticksOf(waiting, t.At), ", "), errWaitingForParents)
	case len(waiting) > 0:
		why := w.noOutcomes(ctx, job, t, waiting, within)
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

// outcomesFromHistory returns how the parents names ended their ticks at,
// as their histories say, for those whose history holds an end of it
// (chain.EndOf): the outcome each would have recorded. A replica writes a tick's outcome record only
// for a job it knows others run after, so a parent run by a replica whose
// copy had not yet read the child's put (runtime schedules) ends without
// one.
func (w *Worker) outcomesFromHistory(ctx context.Context, names []string, at time.Time) map[string]chain.Outcome {
	if w.rdb == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	hist, err := history.ReadJobsSince(rctx, w.rdb, w.cfg.Namespace, names, at)
	if err != nil {
		return nil
	}
	out := map[string]chain.Outcome{}
	for _, n := range names {
		maxRetry := 0
		if p, ok := w.cfg.Job(n); ok {
			maxRetry = p.MaxRetry
		}
		if o, ok := chain.EndOf(hist[n], maxRetry, at); ok {
			out[n] = o
		}
	}
	return out
}

// ticksOf are the ticks at of jobs names, "job@T".
func ticksOf(names []string, at time.Time) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = n + "@" + at.UTC().Format(time.RFC3339)
	}
	return out
}

// noOutcomes says why chained tick t is skipped at its starting deadline,
// its parents waiting having recorded no outcome of their ticks: those
// whose ledger record says their task ended did end, without an outcome
// record (run by a replica whose job list does not run job after them,
// during a rolling deploy that adds the chain; or the record was lost).
func (w *Worker) noOutcomes(ctx context.Context, job *config.Job, t scheduler.Tick, waiting []string, within string) string {
	ended := make([]bool, len(waiting))
	if w.rdb != nil {
		rctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
		pipe := w.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, len(waiting))
		for i, n := range waiting {
			cmds[i] = pipe.Get(rctx, tickRecordKey(w.cfg.Namespace, scheduler.Tick{Job: n, At: t.At}))
		}
		_, _ = pipe.Exec(rctx) // each command's answer is read below
		cancel()
		for i := range waiting {
			ended[i], _, _ = tickRecordOf(cmds[i], t)
		}
	}
	ticks := ticksOf(waiting, t.At)
	var gone []string
	for i, e := range ended {
		if e {
			gone = append(gone, ticks[i])
		}
	}
	if len(gone) == 0 {
		return fmt.Sprintf("its parents did not end their ticks %s: %s", within, strings.Join(ticks, ", "))
	}
	parts := make([]string, len(ticks))
	for i, tk := range ticks {
		if ended[i] {
			parts[i] = tk + " ended without an outcome record (the replica that ran it does not run " + job.Name + " after it: a rolling deploy that adds the chain? or the record was lost)"
		} else {
			parts[i] = tk + " did not end"
		}
	}
	return fmt.Sprintf("no outcome of its parents' ticks within its starting_deadline (%s): %s", job.StartingDeadline, strings.Join(parts, "; "))
}
