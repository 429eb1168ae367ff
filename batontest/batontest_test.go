package batontest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batontest"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// ran records the ticks a handler ran.
type ran struct {
	mu    sync.Mutex
	ticks []time.Time
}

func (r *ran) handler(context.Context, jobs.Run) error { return nil }

func registry(t *testing.T, names ...string) (*jobs.Registry, map[string]*ran) {
	t.Helper()
	reg := jobs.NewRegistry()
	out := map[string]*ran{}
	for _, n := range names {
		r := &ran{}
		out[n] = r
		if err := reg.HandleFunc(n, func(_ context.Context, run jobs.Run) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.ticks = append(r.ticks, run.Tick)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return reg, out
}

func TestEveryMinuteForAnHour(t *testing.T) {
	reg, ran := registry(t, "tick")
	env := batontest.Load(t, `
jobs:
  - name: tick
    schedule: "* * * * *"
    handler: {name: tick}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	start := time.Now()
	env.AdvanceTo(t, t0.Add(time.Hour))
	t.Logf("an hour in %s", time.Since(start))
	if got := env.Dispatched(t, "tick"); len(got) != 60 {
		t.Fatalf("dispatched %d ticks, want 60: %v", len(got), got)
	}
	if n := len(ran["tick"].ticks); n != 60 {
		t.Fatalf("ran %d", n)
	}
}

// Handlers run at their ticks, with the tick's identity; a tick between
// two of the job's is not one of them.
func TestHandlersRunAtTheirTicks(t *testing.T) {
	reg, ran := registry(t, "quarter", "hourly")
	env := batontest.Load(t, `
jobs:
  - name: quarter
    schedule: "@every 15m"
    handler: {name: quarter}
  - name: hourly
    schedule: "0 * * * *"
    handler: {name: hourly}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.Advance(t, 2*time.Hour)
	if !env.Now().Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("clock at %s", env.Now())
	}
	for i := 1; i <= 8; i++ {
		env.RequireRan(t, "quarter", t0.Add(time.Duration(i)*15*time.Minute))
	}
	env.RequireDispatched(t, "hourly", t0.Add(time.Hour))
	env.RequireDispatched(t, "hourly", t0.Add(2*time.Hour))
	env.RequireNotDispatched(t, "hourly", t0.Add(90*time.Minute))
	want := []time.Time{t0.Add(time.Hour), t0.Add(2 * time.Hour)}
	if got := ran["hourly"].ticks; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("hourly ran at %v, want %v", got, want)
	}
	if got := env.Dispatched(t, "quarter"); len(got) != 8 || !got[0].Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("quarter dispatched %v", got)
	}
	// the clock stands still between moves: nothing more runs
	if n := len(env.Runs(t, "quarter")); n != 8 {
		t.Fatalf("%d runs of quarter", n)
	}
}

// A job paused in the config, or paused by an operator, is not dispatched;
// resumed, it is again.
func TestPausedNotDispatched(t *testing.T) {
	reg, ran := registry(t, "cfg", "op")
	env := batontest.Load(t, `
jobs:
  - name: cfg
    schedule: "@every 1m"
    paused: true
    handler: {name: cfg}
  - name: op
    schedule: "@every 1m"
    handler: {name: op}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.Advance(t, time.Minute)
	env.RequireDispatched(t, "op", t0.Add(time.Minute))
	if _, err := env.Cluster(t).Pause(t.Context(), "op", baton.PauseNote{By: "the test"}); err != nil {
		t.Fatal(err)
	}
	env.Advance(t, 2*time.Minute)
	env.RequireNotDispatched(t, "op", t0.Add(2*time.Minute))
	env.RequireNotDispatched(t, "op", t0.Add(3*time.Minute))
	if _, err := env.Cluster(t).Resume(t.Context(), "op", false); err != nil {
		t.Fatal(err)
	}
	env.Advance(t, time.Minute)
	env.RequireDispatched(t, "op", t0.Add(4*time.Minute))
	for i := 1; i <= 4; i++ {
		env.RequireNotDispatched(t, "cfg", t0.Add(time.Duration(i)*time.Minute))
	}
	if len(ran["cfg"].ticks) != 0 || len(ran["op"].ticks) != 2 {
		t.Fatalf("ran cfg %v, op %v", ran["cfg"].ticks, ran["op"].ticks)
	}
	if runs := env.Runs(t, "cfg"); len(runs) != 4 || runs[0].Status != jobs.StatusPaused {
		t.Fatalf("cfg's history: %+v", runs)
	}
}

// fails runs f with a testing.TB of batontest.Run's and returns what it
// printed, failing the test unless f failed.
func fails(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	var out strings.Builder
	if !batontest.Run(&out, f) {
		t.Fatalf("did not fail; printed %q", out.String())
	}
	return out.String()
}

// The helpers fail the test they are given, saying why.
func TestHelpersFail(t *testing.T) {
	reg, _ := registry(t, "job")
	env := batontest.Load(t, `
jobs:
  - name: job
    schedule: "*/10 * * * *"
    handler: {name: job}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.Advance(t, 30*time.Minute)
	for _, c := range []struct {
		name string
		f    func(tb testing.TB)
		want string
	}{
		{"not dispatched: it was", func(tb testing.TB) { env.RequireNotDispatched(tb, "job", t0.Add(10*time.Minute)) },
			`job "job" tick 2030-01-01T00:10:00Z was dispatched (run `},
		{"dispatched: not a tick", func(tb testing.TB) { env.RequireDispatched(tb, "job", t0.Add(15*time.Minute)) },
			`job "job" tick 2030-01-01T00:15:00Z was not dispatched: it is not one of the job's ticks (the next one is 2030-01-01T00:20:00Z)`},
		{"dispatched: ahead of the clock", func(tb testing.TB) { env.RequireDispatched(tb, "job", t0.Add(40*time.Minute)) },
			`the clock is at 2030-01-01T00:30:00Z: move it past the tick first`},
		{"not dispatched: ahead of the clock", func(tb testing.TB) { env.RequireNotDispatched(tb, "job", t0.Add(40*time.Minute)) },
			`the clock is at 2030-01-01T00:30:00Z`},
		{"no such job", func(tb testing.TB) { env.RequireDispatched(tb, "nope", t0) }, `no job "nope" in the config (jobs: [job])`},
		{"backwards", func(tb testing.TB) { env.AdvanceTo(tb, t0) }, `it only moves forward`},
		{"too far", func(tb testing.TB) { env.AdvanceTo(tb, time.Now().Add(batontest.MaxAhead+time.Hour)) }, `more than MaxAhead`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := fails(t, c.f); !strings.Contains(got, c.want) {
				t.Fatalf("printed %q, want %q in it", got, c.want)
			}
		})
	}
	// a failed helper ends the caller's test there and then
	after := false
	fails(t, func(tb testing.TB) {
		env.RequireNotDispatched(tb, "job", t0.Add(20*time.Minute))
		after = true
	})
	if after {
		t.Fatal("the test went on after a failed Require")
	}
	// and a passing one fails nothing
	if batontest.Run(io.Discard, func(tb testing.TB) { env.RequireDispatched(tb, "job", t0.Add(20*time.Minute)) }) {
		t.Fatal("RequireDispatched failed on a dispatched tick")
	}
}

// A handler that does not return in time fails AdvanceTo, naming the run.
func TestAdvanceTimesOut(t *testing.T) {
	release := make(chan struct{})
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("stuck", func(ctx context.Context, _ jobs.Run) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	env := batontest.Load(t, `
jobs:
  - name: stuck
    schedule: "@every 1m"
    handler: {name: stuck}
`, batontest.WithHandlers(reg), batontest.WithStart(t0), batontest.WithTimeout(300*time.Millisecond))
	got := fails(t, func(tb testing.TB) { env.Advance(tb, time.Minute) })
	close(release)
	want := `ticks not settled after 300ms:` + "\n\t" + `job "stuck" tick 2030-01-01T00:01:00Z: running (attempt 1): the handler has not returned`
	if !strings.Contains(got, want) {
		t.Fatalf("printed %q, want %q in it", got, want)
	}
}

// A runtime schedule put through the Env runs on the fake clock from its
// put instant, with its payload, until it is deleted; its ticks settle in
// AdvanceTo like the job list's and the Require helpers know it by its job
// name.
func TestPutScheduleRunsOnTheFakeClock(t *testing.T) {
	reg := jobs.NewRegistry()
	var mu sync.Mutex
	var got []string
	if err := reg.HandleFunc("report", func(_ context.Context, run jobs.Run) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, run.Job+" "+run.Tick.Format("15:04")+" "+string(run.Payload))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	env := batontest.Load(t, `
jobs:
  - name: listed
    schedule: "0 0 1 1 *"
    handler: {name: report}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.AdvanceTo(t, t0.Add(90*time.Minute)) // 01:30
	s := env.PutSchedule(t, "report/tenant-42", baton.ScheduleSpec{Schedule: "0 * * * *", Handler: "report", Payload: []byte(`{"tenant":42}`)})
	if s.Job != "@report/tenant-42" || !s.Updated.Equal(t0.Add(90*time.Minute)) {
		t.Fatalf("put %+v: want job @report/tenant-42 put at the fake clock's 01:30", s)
	}
	env.AdvanceTo(t, t0.Add(4*time.Hour)) // 02:00, 03:00, 04:00
	env.RequireRan(t, s.Job, t0.Add(3*time.Hour))
	if d := env.Dispatched(t, s.Job); len(d) != 3 || !d[0].Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("dispatched %v: want 02:00, 03:00 and 04:00 (the first at or after the put)", d)
	}
	env.DeleteSchedule(t, "report/tenant-42", false)
	env.AdvanceTo(t, t0.Add(6*time.Hour))
	mu.Lock()
	defer mu.Unlock()
	want := []string{`@report/tenant-42 02:00 {"tenant":42}`, `@report/tenant-42 03:00 {"tenant":42}`, `@report/tenant-42 04:00 {"tenant":42}`}
	if !slices.Equal(got, want) {
		t.Fatalf("ran %q, want %q", got, want)
	}
}

// On a real Redis the fake clock starts at Redis TIME or later and runs
// ahead of it; the Env's keys go when the test ends.
func TestRealRedis(t *testing.T) {
	srv := redistest.New(t)
	url := "redis://" + srv.Addr() + "/0"
	reg, ran := registry(t, "job")
	const yaml = `
jobs:
  - name: job
    schedule: "@every 1m"
    handler: {name: job}
`
	t.Run("ahead", func(t *testing.T) {
		before := time.Now()
		env := batontest.Load(t, yaml, batontest.WithHandlers(reg), batontest.WithRedis(url))
		// the next whole minute of the moment Load ran: after before, and
		// within two minutes of it (Load may have crossed a minute)
		start := env.Now()
		if !start.After(before) || start.Second() != 0 || start.Sub(before) > 2*time.Minute {
			t.Fatalf("start %s, loaded from %s: want the next whole minute", start, before.UTC())
		}
		env.Advance(t, 3*time.Hour)
		if got := env.Dispatched(t, "job"); len(got) != 180 {
			t.Fatalf("%d dispatched, want 180", len(got))
		}
		env.RequireRan(t, "job", start.Add(3*time.Hour))
		if n := len(ran["job"].ticks); n != 180 {
			t.Fatalf("ran %d", n)
		}
		// a runtime schedule's keys ({schedules}) and the roster's go too
		env.PutSchedule(t, "tenant-1", baton.ScheduleSpec{Schedule: "@every 1m", Handler: "job"})
		env.Advance(t, time.Minute)
		if keys := srv.Client().Keys(t.Context(), "*{"+env.Config().Namespace+":roster}*").Val(); len(keys) == 0 {
			t.Fatal("no roster key: the check below proves nothing")
		}
	})
	if keys := srv.Client().Keys(t.Context(), "*baton-*").Val(); len(keys) != 0 {
		t.Fatalf("keys left: %v", keys)
	}
	t.Run("behind", func(t *testing.T) {
		got := fails(t, func(tb testing.TB) {
			batontest.Load(tb, yaml, batontest.WithRedis(url), batontest.WithStart(time.Now().Add(-time.Hour)))
		})
		if !strings.Contains(got, "on a real Redis the fake clock cannot run behind Redis's") {
			t.Fatalf("printed %q", got)
		}
	})
}

// A local-mode job pinned to the cluster's leader runs in the scheduler's
// process at each tick: the Env waits for its replica to lead.
func TestLeaderJob(t *testing.T) {
	reg, ran := registry(t, "lead")
	env := batontest.Load(t, `
jobs:
  - name: lead
    schedule: "@every 1m"
    mode: local
    leader: true
    handler: {name: lead}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.Advance(t, 3*time.Minute)
	for i := 1; i <= 3; i++ {
		env.RequireRan(t, "lead", t0.Add(time.Duration(i)*time.Minute))
	}
	if n := len(ran["lead"].ticks); n != 3 {
		t.Fatalf("ran %d", n)
	}
}

// The schedule semantics on the fake clock: a one-shot job's one tick, a
// max_runs job's first N ticks and none after, calendar days (the last day
// of the month, the second Monday) and a start/end window.
func TestScheduleSemantics(t *testing.T) {
	reg, _ := registry(t, "once", "twice", "month-end", "second-monday", "window")
	env := batontest.Load(t, `
jobs:
  - name: once
    at: "2030-01-01T10:00:00Z"
    handler: {name: once}
  - name: twice
    schedule: "0 * * * *"
    max_runs: 2
    handler: {name: twice}
  - name: month-end
    schedule: "0 23 L * *"
    handler: {name: month-end}
  - name: second-monday
    schedule: "0 9 * * 1#2"
    handler: {name: second-monday}
  - name: window
    schedule: "0 12 * * *"
    start: "2030-01-03T00:00:00Z"
    end: "2030-01-05T23:59:59Z"
    handler: {name: window}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.AdvanceTo(t, time.Date(2030, 3, 1, 0, 0, 0, 0, time.UTC))

	env.RequireRan(t, "once", time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC))
	if got := env.Dispatched(t, "once"); len(got) != 1 {
		t.Errorf("one-shot dispatched %v", got)
	}
	env.RequireRan(t, "twice", time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC))
	env.RequireRan(t, "twice", time.Date(2030, 1, 1, 2, 0, 0, 0, time.UTC))
	env.RequireNotDispatched(t, "twice", time.Date(2030, 1, 1, 3, 0, 0, 0, time.UTC))
	if got := env.Dispatched(t, "twice"); len(got) != 2 {
		t.Errorf("max_runs 2 dispatched %v", got)
	}
	wantTicks := func(job string, want ...time.Time) {
		t.Helper()
		got := env.Dispatched(t, job)
		if !slices.EqualFunc(got, want, func(a, b time.Time) bool { return a.Equal(b) }) {
			t.Errorf("%s dispatched %v, want %v", job, got, want)
		}
	}
	wantTicks("month-end", time.Date(2030, 1, 31, 23, 0, 0, 0, time.UTC), time.Date(2030, 2, 28, 23, 0, 0, 0, time.UTC))
	wantTicks("second-monday", time.Date(2030, 1, 14, 9, 0, 0, 0, time.UTC), time.Date(2030, 2, 11, 9, 0, 0, 0, time.UTC))
	wantTicks("window", time.Date(2030, 1, 3, 12, 0, 0, 0, time.UTC), time.Date(2030, 1, 4, 12, 0, 0, 0, time.UTC), time.Date(2030, 1, 5, 12, 0, 0, 0, time.UTC))
}

// Jobs sharing a limit of one slot on the fake clock: the runs due at the
// same tick run one after the other, never two at once, and all of them run.
func TestALimitOnTheFakeClockRunsItsJobsOneAtATime(t *testing.T) {
	var mu sync.Mutex
	running, most, ran := 0, 0, 0
	reg := jobs.NewRegistry()
	for _, name := range []string{"a", "b", "c"} {
		_ = reg.HandleFunc(name, func(_ context.Context, run jobs.Run) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // long enough for another run to start beside it, if it could
			mu.Lock()
			running--
			ran++
			mu.Unlock()
			if run.Slot.Limit != "warehouse" || run.Slot.Index != 0 {
				t.Errorf("run of %s holds slot %+v", run.Job, run.Slot)
			}
			return nil
		})
	}
	env := batontest.Load(t, `
limits: {warehouse: 1}
jobs:
  - {name: a, schedule: "0 * * * *", limit: warehouse, handler: {name: a}}
  - {name: b, schedule: "0 * * * *", limit: warehouse, handler: {name: b}}
  - {name: c, schedule: "0 * * * *", limit: warehouse, handler: {name: c}}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.Advance(t, time.Hour)
	for _, j := range []string{"a", "b", "c"} {
		env.RequireRan(t, j, t0.Add(time.Hour))
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 || ran != 3 {
		t.Errorf("%d runs at once at most, %d ran; want 1 and 3", most, ran)
	}
}

// A chain on the fake clock: load runs once per tick of extract, after it,
// and not for a tick extract failed.
func TestAChainRunsOnTheFakeClock(t *testing.T) {
	var mu sync.Mutex
	var order []string
	reg := jobs.NewRegistry()
	_ = reg.HandleFunc("extract", func(_ context.Context, run jobs.Run) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, "extract "+run.Tick.Format("15:04"))
		if run.Tick.Hour() == 2 {
			return errors.New("the source is down")
		}
		return nil
	})
	_ = reg.HandleFunc("load", func(_ context.Context, run jobs.Run) error {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, "load "+run.Tick.Format("15:04"))
		return nil
	})
	env := batontest.Load(t, `
jobs:
  - {name: extract, schedule: "0 * * * *", max_retry: 0, handler: {name: extract}}
  - {name: load, after: [extract], handler: {name: load}}
`, batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.Advance(t, 3*time.Hour)
	env.RequireRan(t, "load", t0.Add(time.Hour))
	env.RequireRan(t, "load", t0.Add(3*time.Hour))
	mu.Lock()
	defer mu.Unlock()
	want := fmt.Sprintf("[extract %s load %s extract %s extract %s load %s]", t0.Add(time.Hour).Format("15:04"), t0.Add(time.Hour).Format("15:04"),
		t0.Add(2*time.Hour).Format("15:04"), t0.Add(3*time.Hour).Format("15:04"), t0.Add(3*time.Hour).Format("15:04"))
	if fmt.Sprint(order) != want {
		t.Errorf("ran %v, want %s", order, want)
	}
}

// A runtime schedule naming a runtime calendar runs on the fake clock on
// the days the calendar leaves, and a change of the calendar reaches it
// (PutCalendar returns once the replica follows).
func TestPutCalendarReachesItsSchedulesOnTheFakeClock(t *testing.T) {
	reg, ran := registry(t, "report")
	env := batontest.Load(t, "timezone: UTC\njobs: []\n", batontest.WithHandlers(reg), batontest.WithStart(t0))
	day := func(n int) string { return t0.AddDate(0, 0, n).Format(time.DateOnly) }
	env.PutCalendar(t, "off", baton.CalendarSpec{Dates: []string{day(1), day(2)}})
	s := env.PutSchedule(t, "report/a", baton.ScheduleSpec{Schedule: "0 9 * * *", Handler: "report", Exclude: []string{"off"}})
	env.AdvanceTo(t, t0.AddDate(0, 0, 1).Add(time.Hour)) // day 0 at 09:00 runs
	// day 1 and 2 are no longer off, day 3 is: the tick awaited (day 3's)
	// moves back to day 1's
	env.PutCalendar(t, "off", baton.CalendarSpec{Dates: []string{day(3)}})
	env.AdvanceTo(t, t0.AddDate(0, 0, 5).Add(time.Hour))
	var got []string
	for _, at := range env.Dispatched(t, s.Job) {
		got = append(got, at.Format(time.DateOnly))
	}
	if want := []string{day(0), day(1), day(2), day(4)}; !slices.Equal(got, want) {
		t.Fatalf("dispatched %v, want %v", got, want)
	}
	if n := len(ran["report"].ticks); n != 4 {
		t.Fatalf("ran %d", n)
	}
}

// A chain of runtime schedules on the fake clock: the child runs once per
// tick of its parent, after it.
func TestARuntimeChainRunsOnTheFakeClock(t *testing.T) {
	reg, ran := registry(t, "extract", "load")
	env := batontest.Load(t, "timezone: UTC\njobs: []\n", batontest.WithHandlers(reg), batontest.WithStart(t0))
	env.PutSchedule(t, "extract", baton.ScheduleSpec{Schedule: "0 * * * *", Handler: "extract"})
	env.AdvanceTo(t, t0.Add(30*time.Minute)) // extract's 00:00 runs alone
	s := env.PutSchedule(t, "load", baton.ScheduleSpec{After: []string{"@extract"}, Handler: "load"})
	env.AdvanceTo(t, t0.Add(3*time.Hour+time.Minute))
	env.RequireRan(t, s.Job, t0.Add(3*time.Hour))
	if n, m := len(ran["extract"].ticks), len(ran["load"].ticks); n != 4 || m != 3 {
		t.Fatalf("extract ran %d ticks, load %d: want 4 (from 00:00) and 3 (from its put on)", n, m)
	}
	ran["load"].mu.Lock()
	defer ran["load"].mu.Unlock()
	if first := ran["load"].ticks[0]; !first.Equal(t0.Add(time.Hour)) {
		t.Fatalf("load's first tick %s, want 01:00", first)
	}
}
