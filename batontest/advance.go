package batontest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// AdvanceTo moves the fake clock forward to at, instant by instant: to
// each moment a tick of some job fires (its due time, plus the job's
// jitter), in order, and then to at. At each instant it waits until the
// ticks fired so far are settled: each one dispatched and its run's first
// attempt finished (the handler returned, or the run was skipped,
// replaced or timed out), or recorded as not dispatched (paused, missed).
// So when AdvanceTo returns, every tick due up to at has been handled as if
// that time had passed, and the worker has finished the runs they started.
// It fails the test, naming the ticks still open and what became of them,
// when one instant's ticks do not settle within the Env's timeout (see
// WithTimeout) of real time, when at is before the clock, and when at is
// more than MaxAhead ahead of the real clock.
func (e *Env) AdvanceTo(t testing.TB, at time.Time) {
	t.Helper()
	now := e.clk.Now()
	switch {
	case at.Before(now):
		t.Fatalf("batontest: AdvanceTo(%s): the clock is at %s already: it only moves forward", at.Format(time.RFC3339), now.Format(time.RFC3339))
	case at.After(time.Now().Add(MaxAhead)):
		t.Fatalf("batontest: AdvanceTo(%s): more than MaxAhead (%s) ahead of the real clock", at.Format(time.RFC3339), MaxAhead)
	}
	for {
		e.settle(t, at)
		now = e.clk.Now()
		if !now.Before(at) {
			return
		}
		target := at
		if next, ok := e.nextFire(); ok && next.Before(at) {
			target = next
		}
		e.set(target)
	}
}

// Advance is AdvanceTo(t, Now()+d).
func (e *Env) Advance(t testing.TB, d time.Duration) {
	t.Helper()
	e.AdvanceTo(t, e.clk.Now().Add(d))
}

// set moves the server's clock (on the embedded server), then the
// scheduler's: a claim that the move sets off finds Redis TIME there.
func (e *Env) set(at time.Time) {
	if e.srv != nil {
		e.srv.SetTime(at)
	}
	e.clk.Set(at)
}

// fireAt is when the scheduler fires job j's tick at: its due time plus the
// job's stable jitter.
func fireAt(j *config.Job, at time.Time) time.Time {
	return at.Add(scheduler.Jitter(j.Name, j.Jitter))
}

// nextFire is the earliest instant a tick not yet settled fires.
func (e *Env) nextFire() (time.Time, bool) {
	var first time.Time
	for name, at := range e.next {
		j, _ := e.cfg.Job(name)
		if f := fireAt(j, at); first.IsZero() || f.Before(first) {
			first = f
		}
	}
	return first, !first.IsZero()
}

// fired lists the ticks not yet settled that have fired by the clock's
// time, by job.
func (e *Env) fired() map[string][]time.Time {
	now := e.clk.Now()
	out := map[string][]time.Time{}
	for name, at := range e.next {
		j, _ := e.cfg.Job(name)
		for t := at; !t.IsZero() && !fireAt(j, t).After(now); t = j.Sched.Next(t).UTC() {
			out[name] = append(out[name], t)
		}
	}
	return out
}

// settle waits until every tick fired by the clock's time is settled, and
// moves each job's next tick past them. It fails the test after the
// timeout. at is AdvanceTo's goal, for the message.
func (e *Env) settle(t testing.TB, at time.Time) {
	t.Helper()
	open := e.fired()
	if len(open) == 0 {
		return
	}
	var last map[string][]jobs.RunRecord
	var readErr error
	ok := poll.Until(e.timeout, func() bool {
		names := make([]string, 0, len(open))
		n := 0
		for name, ticks := range open {
			names = append(names, name)
			n = max(n, len(ticks))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		last, readErr = history.ReadJobs(ctx, e.rdb, e.cfg.Namespace, names, n+8)
		if readErr != nil {
			return false
		}
		for name, ticks := range open {
			open[name] = slices.DeleteFunc(ticks, func(at time.Time) bool {
				return settled(last[name], at) || e.doneWithoutRun(ctx, name, at)
			})
			if len(open[name]) == 0 {
				delete(open, name)
			}
		}
		return len(open) == 0
	})
	if !ok {
		var lines []string
		for name, ticks := range open {
			for _, at := range ticks {
				lines = append(lines, fmt.Sprintf("job %q tick %s: %s", name, at.Format(time.RFC3339), describe(last[name], at)))
			}
		}
		slices.Sort(lines)
		if readErr != nil {
			lines = append(lines, "reading the history: "+readErr.Error())
		}
		t.Fatalf("batontest: AdvanceTo(%s): at %s, ticks not settled after %s:\n\t%s",
			at.Format(time.RFC3339), e.clk.Now().Format(time.RFC3339), e.timeout, strings.Join(lines, "\n\t"))
	}
	now := e.clk.Now()
	for name, at := range e.next {
		j, _ := e.cfg.Job(name)
		for !at.IsZero() && !fireAt(j, at).After(now) {
			at = j.Sched.Next(at).UTC()
		}
		if at.IsZero() {
			delete(e.next, name)
			continue
		}
		e.next[name] = at
	}
}

// doneWithoutRun tells whether tick at of a job with max_runs is decided
// without a run: the job had its max_runs ticks and at is not one of them,
// so the dispatcher refuses it (or the scheduler, having retired the job,
// does not claim it), and the history has no record of it.
func (e *Env) doneWithoutRun(ctx context.Context, job string, at time.Time) bool {
	j, ok := e.cfg.Job(job)
	if !ok || j.MaxRuns == 0 {
		return false
	}
	keys := handoff.JobRunCountKeys(e.cfg.Namespace, j)
	n, err := e.rdb.Get(ctx, keys[0]).Int()
	if err != nil || n < j.MaxRuns {
		return false
	}
	id := scheduler.Tick{Job: job, At: at}.ID()
	_, err = e.rdb.ZScore(ctx, keys[1], id).Result()
	return errors.Is(err, redis.Nil)
}

// records are the history's records of tick at.
func records(recs []jobs.RunRecord, at time.Time) []jobs.RunRecord {
	var out []jobs.RunRecord
	for _, r := range recs {
		if r.Tick.Equal(at) && !r.Manual {
			out = append(out, r)
		}
	}
	return out
}

// settled tells whether the history shows tick at decided: not dispatched,
// or dispatched and its run's attempt over.
func settled(recs []jobs.RunRecord, at time.Time) bool {
	for _, r := range records(recs, at) {
		switch r.Status {
		case "", jobs.StatusDispatched, jobs.StatusRunning:
		default:
			return true
		}
	}
	return false
}

// describe says what the history shows of tick at, for a failure message.
func describe(recs []jobs.RunRecord, at time.Time) string {
	rs := records(recs, at)
	if len(rs) == 0 {
		return "no record: not claimed or not dispatched yet"
	}
	var parts []string
	for _, r := range rs {
		switch r.Status {
		case jobs.StatusDispatched:
			parts = append(parts, "dispatched, not started by the worker")
		case jobs.StatusRunning:
			parts = append(parts, fmt.Sprintf("running (attempt %d): the handler has not returned", r.Attempt))
		default:
			s := string(r.Status)
			if r.Reason != "" {
				s += ": " + r.Reason
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "; ")
}
