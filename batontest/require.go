package batontest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/jobs"
)

// Runs returns the run history of job, oldest tick first: a record per run
// and per tick that was not dispatched, as `baton history` shows them
// (manual runs included). Times other than Tick are Redis's: the fake
// clock's on the embedded server, the real one on a real Redis.
func (e *Env) Runs(t testing.TB, job string) []jobs.RunRecord {
	t.Helper()
	e.job(t, job)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	recs, err := history.Read(ctx, e.rdb, e.cfg.Namespace, job, 0)
	if err != nil {
		t.Fatalf("batontest: %v", err)
	}
	slices.Reverse(recs)
	return recs
}

// Dispatched returns the ticks of job that were dispatched, oldest first
// (not manual runs).
func (e *Env) Dispatched(t testing.TB, job string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, r := range e.Runs(t, job) {
		if !r.Manual && dispatched(r) && !slices.ContainsFunc(out, r.Tick.Equal) {
			out = append(out, r.Tick)
		}
	}
	return out
}

// RequireDispatched fails the test unless tick of job was dispatched. The
// clock must have reached the tick (AdvanceTo); the message says what
// became of the tick instead, or which ticks of the job are near it when
// it is not one of the job's.
func (e *Env) RequireDispatched(t testing.TB, job string, tick time.Time) {
	t.Helper()
	recs := e.tick(t, job, tick)
	for _, r := range recs {
		if dispatched(r) {
			return
		}
	}
	t.Fatalf("batontest: job %q tick %s was not dispatched: %s", job, tick.UTC().Format(time.RFC3339), e.what(job, tick, recs))
}

// RequireNotDispatched fails the test if tick of job was dispatched. The
// clock must have reached the tick (AdvanceTo): a tick still to come is not
// "not dispatched".
func (e *Env) RequireNotDispatched(t testing.TB, job string, tick time.Time) {
	t.Helper()
	for _, r := range e.tick(t, job, tick) {
		if dispatched(r) {
			t.Fatalf("batontest: job %q tick %s was dispatched (run %s, status %s)", job, tick.UTC().Format(time.RFC3339), r.RunID, r.Status)
		}
	}
}

// RequireRan fails the test unless tick of job ran and its handler
// succeeded (status ok).
func (e *Env) RequireRan(t testing.TB, job string, tick time.Time) {
	t.Helper()
	recs := e.tick(t, job, tick)
	for _, r := range recs {
		if r.Status == jobs.StatusOK {
			return
		}
	}
	t.Fatalf("batontest: job %q tick %s did not run to success: %s", job, tick.UTC().Format(time.RFC3339), e.what(job, tick, recs))
}

// job returns the config's job, failing the test when there is none.
func (e *Env) job(t testing.TB, name string) *config.Job {
	t.Helper()
	j, ok := e.cfg.Job(name)
	if !ok {
		var names []string
		for _, j := range e.cfg.Jobs {
			names = append(names, j.Name)
		}
		t.Fatalf("batontest: no job %q in the config (jobs: %v)", name, names)
	}
	return j
}

// tick returns the history's records of tick of job, once the clock has
// reached it.
func (e *Env) tick(t testing.TB, job string, tick time.Time) []jobs.RunRecord {
	t.Helper()
	e.job(t, job)
	if now := e.clk.Now(); tick.After(now) {
		t.Fatalf("batontest: job %q tick %s: the clock is at %s: move it past the tick first (AdvanceTo)",
			job, tick.UTC().Format(time.RFC3339), now.Format(time.RFC3339))
	}
	return records(e.Runs(t, job), tick)
}

// dispatched tells whether a record is of a dispatched tick (whatever its
// run did).
func dispatched(r jobs.RunRecord) bool {
	return r.Status != jobs.StatusMissed && r.Status != jobs.StatusPaused
}

// what says what became of tick of job, which was not dispatched.
func (e *Env) what(job string, tick time.Time, recs []jobs.RunRecord) string {
	if len(recs) > 0 {
		return describe(recs, tick)
	}
	j, _ := e.cfg.Job(job)
	if j.Sched == nil {
		return "no record, and the job has no schedule"
	}
	if next := j.Sched.Next(tick.Add(-time.Nanosecond)); !next.Equal(tick) {
		return fmt.Sprintf("it is not one of the job's ticks (the next one is %s)", next.UTC().Format(time.RFC3339))
	}
	if !tick.After(e.start) {
		return fmt.Sprintf("no record: the tick is not after the Env's start %s", e.start.Format(time.RFC3339))
	}
	return "no record of the tick"
}
