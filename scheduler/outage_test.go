package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Schedule: the replica stays up while the lock masters (or the queue)
// fail for five ticks of three @every 1s jobs, then answer again. Retrying
// each failed tick until it succeeds would dispatch all five at once, whatever
// the job's catch-up policy. The policy must apply, as after a restart:
// latest runs the newest of them, all the newest catchup_max (2), skip none
// of the superseded ones (the current tick, t0+6s, runs under every policy);
// the rest are recorded missed in Redis (so a replica that comes later, or
// runs beside, counts each once) and counted.
func TestOutageAppliesCatchupPolicy(t *testing.T) {
	for _, kind := range []string{"masters", "queue"} {
		t.Run(kind, func(t *testing.T) {
			s := redistest.New(t)
			p := redistest.NewTestProxy(t, s.Addr())
			viaProxy := s.TestClient(t, func(o *redis.Options) { o.Addr = p.Addr() })
			locks, err := locking.New(viaProxy, locking.WithFreshDeployment())
			if err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			var queueDown atomic.Bool
			var mu sync.Mutex
			failedCalls := map[string]int{} // tick ID -> dispatches refused
			d := scheduler.DispatcherFunc(func(ctx context.Context, tk scheduler.Tick) error {
				if queueDown.Load() {
					mu.Lock()
					failedCalls[tk.ID()]++
					mu.Unlock()
					return errors.New("queue down")
				}
				return rec.Dispatch(ctx, tk)
			})
			jobs := []scheduler.Job{
				{Name: "latest", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupLatest},
				{Name: "all", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupAll, CatchupMax: 2},
				{Name: "skip", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupSkip},
			}
			t0 := now()
			clk := clock.NewFake(t0.Add(100 * time.Millisecond))
			r := startWith(t, locks, jobs, d, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour),
				scheduler.WithLogger(slog.New(slog.NewTextHandler(tlog{t}, nil))))
			if err := clk.BlockUntil(4); err != nil { // the loop, membership, skew and held-tick timers
				t.Fatal(err)
			}
			clk.Advance(900 * time.Millisecond)
			rec.wait(t, 3) // the ticks of t0+1s, with the clock standing still
			rdb := s.TestClient(t)
			waitFor(t, func() bool { // and their commits
				n := 0
				for _, j := range jobs {
					key := fmt.Sprintf("baton:{%s}:tick:%d", j.Name, t0.Add(time.Second).UnixMilli())
					if rdb.Get(context.Background(), key).Val() == "done" {
						n++
					}
				}
				return n == 3
			}, "the first ticks committed")

			if kind == "masters" {
				if err := p.Cut(); err != nil {
					t.Fatal(err)
				}
			} else {
				queueDown.Store(true)
			}
			// ticks t0+2s .. t0+6s come due, fail, and are held back
			advanceUntil(t, clk, func() bool { return !clk.Now().Before(t0.Add(6600 * time.Millisecond)) }, "t0+6.6s")
			if kind == "masters" {
				// the claims of dropped ticks fail too: all stay held
				waitFor(t, func() bool { return r.s.Stats().Held == 15 }, "15 ticks held back")
				if err := p.Restore(); err != nil {
					t.Fatal(err)
				}
				// let the client's pool shed its dead connections first, in
				// real time (the fake clock stands still meanwhile)
				for ok := 0; ok < 30; {
					if viaProxy.Ping(context.Background()).Err() == nil {
						ok++
					}
				}
			} else {
				// claims work: the policy drops ticks as the outage goes on;
				// wait until the last ones have failed twice (then held)
				waitFor(t, func() bool {
					mu.Lock()
					defer mu.Unlock()
					for _, j := range jobs {
						if failedCalls[j.Name+"@"+t0.Add(6*time.Second).UTC().Format(time.RFC3339)] < 2 {
							return false
						}
					}
					return true
				}, "the ticks of t0+6s to fail twice")
				queueDown.Store(false)
			}
			advanceUntil(t, clk, func() bool {
				return !clk.Now().Before(t0.Add(9*time.Second)) && r.s.Stats().Held == 0
			}, "the held ticks claimed")
			r.stop()

			// t0+6s is still the current tick when the masters answer
			// again (its successor not due): no policy drops it
			want := map[string][]int{"latest": {6}, "all": {5, 6}, "skip": {6}}
			got := map[string][]int{}
			for _, tk := range rec.dispatched() {
				if sec := int(tk.At.Sub(t0) / time.Second); sec >= 2 && sec <= 6 {
					got[tk.Job] = append(got[tk.Job], sec)
				}
			}
			for job, w := range want {
				g := got[job]
				slices.Sort(g)
				if !slices.Equal(g, w) {
					t.Errorf("%s: ticks of the outage dispatched %v, want %v", job, g, w)
				}
			}
			// the others are recorded missed, once
			for job, w := range want {
				for sec := 2; sec <= 6; sec++ {
					if slices.Contains(w, sec) {
						continue
					}
					key := fmt.Sprintf("baton:{%s}:tick:%d", job, t0.Add(time.Duration(sec)*time.Second).UnixMilli())
					if v, err := rdb.Get(context.Background(), key).Result(); v != "missed" {
						t.Errorf("%s at t0+%ds: record %q, %v; want missed", job, sec, v, err)
					}
				}
			}
			if st := r.s.Stats(); st.Missed != 11 {
				t.Errorf("missed %d, want 11 (4 + 3 + 4)", st.Missed)
			}
			if js := r.s.JobStats(); js["latest"].Missed != 4 || js["all"].Missed != 3 || js["skip"].Missed != 4 {
				t.Errorf("missed by job: latest %d, all %d, skip %d", js["latest"].Missed, js["all"].Missed, js["skip"].Missed)
			}
		})
	}
}

// advanceUntil moves the fake clock on in small steps (letting the
// scheduler's goroutines run between them) until cond holds, for at most 30
// seconds of real time.
func advanceUntil(t *testing.T, clk *clock.Fake, cond func() bool, what string) {
	t.Helper()
	held := poll.Until(30*time.Second, func() bool {
		if cond() {
			return true
		}
		clk.Advance(25 * time.Millisecond)
		return false
	})
	if !held {
		t.Fatalf("timed out waiting for %s (fake clk at %s)", what, clk.Now().Format(time.RFC3339Nano))
	}
}

// waitFor waits (real time) at most 20 seconds for cond.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	poll.Require(t, 20*time.Second, what, cond)
}

// tlog writes log lines to t.Log.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// blockMarks holds the catch-up's reads of the jobs' marks (a pipeline of
// GETs of "...:mark" keys) on a real connection until release is closed.
type blockMarks struct{ release chan struct{} }

func (b blockMarks) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (b blockMarks) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (b blockMarks) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "get" && len(c.Args()) > 1 && strings.HasSuffix(fmt.Sprint(c.Args()[1]), ":mark") {
				<-b.release
				break
			}
		}
		return next(ctx, cmds)
	}
}

// blockingLog is a slog handler that holds the catch-up's "tick missed"
// lines until release is closed, standing in for a catch-up that lists and
// logs thousands of ticks.
type blockingLog struct{ release chan struct{} }

func (b blockingLog) Enabled(context.Context, slog.Level) bool { return true }
func (b blockingLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "while no replica ran") {
		<-b.release
	}
	return nil
}
func (b blockingLog) WithAttrs([]slog.Attr) slog.Handler { return b }
func (b blockingLog) WithGroup(string) slog.Handler      { return b }

// The catch-up at start lists and logs the ticks missed since each job's
// mark (up to 100,000 per job): with many jobs that takes long. It must not
// hold up the other jobs' first claims: here its lines hang until the test
// lets them go, and the first tick of another job is dispatched meanwhile.
// (The marks themselves are read before any claim: a live claim would
// advance them; TestCatchupReadsMarksBeforeLiveClaims.)
func TestCatchupDoesNotDelayFirstClaims(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	t0 := now()
	rdb.Set(context.Background(), "baton:{c}:mark", t0.Add(-48*time.Hour).UnixMilli(), 0)
	b := blockingLog{release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(b.release) }) }
	rec := newRecorder()
	clk := clock.NewFake(t0.Add(100 * time.Millisecond))
	jobs := []scheduler.Job{
		{Name: "c", Schedule: every(t, "@every 1s"), StartingDeadline: 5 * time.Second, Catchup: scheduler.CatchupLatest},
		{Name: "r", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute},
	}
	r := start(t, []*redis.Client{rdb}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour),
		scheduler.WithLogger(slog.New(b)))
	t.Cleanup(release)                        // before r stops (cleanups run last first)
	if err := clk.BlockUntil(4); err != nil { // the loop's timer exists while the catch-up hangs
		t.Fatal(err)
	}
	next := jobs[1].Schedule.Next(clk.Now())
	clk.Set(next)
	id := "r@" + next.UTC().Format(time.RFC3339)
	waitFor(t, func() bool { return len(rec.snapshot()[id]) == 1 }, "r's first tick, while the catch-up hangs")
	release()
	r.stop()
}
