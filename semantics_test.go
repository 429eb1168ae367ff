package baton_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// runLog collects the runs of Go handler jobs, by job.
type runLog struct {
	mu   sync.Mutex
	runs map[string][]jobs.Run
}

func (l *runLog) registry(t *testing.T, names ...string) *jobs.Registry {
	t.Helper()
	reg := jobs.NewRegistry()
	for _, n := range names {
		if err := reg.HandleFunc(n, func(_ context.Context, run jobs.Run) error {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.runs == nil {
				l.runs = map[string][]jobs.Run{}
			}
			l.runs[run.Job] = append(l.runs[run.Job], run)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func (l *runLog) of(job string) []jobs.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]jobs.Run(nil), l.runs[job]...)
}

// replicaRun runs replica r until stop is called (which waits for Run to
// return); the test's end stops it too.
func replicaRun(t *testing.T, cfg *config.Config, opts ...baton.Option) (stop func()) {
	t.Helper()
	r, err := baton.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil && ctx.Err() == nil {
				t.Errorf("replica %s: %v", r.ID(), err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// max_runs: 3 on three replicas, one of them stopped and another started
// after the first run: exactly 3 ticks run, the ticks after them are decided
// without a run, and a manual trigger still runs without counting.
func TestMaxRunsExactAcrossReplicasAndRestarts(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
worker: {shutdown_grace: 2s}
jobs:
  - name: thrice
    schedule: "@every 1s"
    max_runs: 3
    handler: {name: thrice}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	var log runLog
	reg := log.registry(t, "thrice")
	stop1 := replicaRun(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r1"))
	replicaRun(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r2"))
	poll.Require(t, 20*time.Second, "a first run", func() bool { return len(log.of("thrice")) >= 1 })
	stop1()
	replicaRun(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r3"))
	poll.Require(t, 20*time.Second, "three runs", func() bool { return len(log.of("thrice")) >= 3 })

	runs := log.of("thrice")
	last := runs[len(runs)-1].Tick
	for _, r := range runs {
		last = maxTime(last, r.Tick)
	}
	// the scheduler decides the ticks after the third without running them
	rdb := srv.TestClient(t)
	ctx := context.Background()
	for _, at := range []time.Time{last.Add(time.Second), last.Add(2 * time.Second)} {
		key := "baton:{thrice}:tick:" + strconv.FormatInt(at.UnixMilli(), 10)
		poll.Require(t, 20*time.Second, "tick "+at.Format(time.RFC3339)+" decided", func() bool {
			v, err := rdb.Get(ctx, key).Result()
			return err == nil && v == "done"
		})
	}
	if got := log.of("thrice"); len(got) != 3 {
		t.Fatalf("%d runs, want 3: %+v", len(got), got)
	}
	seen := map[time.Time]bool{}
	for _, r := range runs {
		if seen[r.Tick] {
			t.Errorf("tick %s ran twice", r.Tick)
		}
		seen[r.Tick] = true
	}
	keys := handoff.RunCountKeys("baton", "thrice")
	if n, err := rdb.Get(ctx, keys[0]).Int(); err != nil || n != 3 {
		t.Errorf("count %d (%v), want 3", n, err)
	}

	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j := st.Jobs[0]; j.Runs != 3 || j.MaxRuns != 3 || j.Done != "ran its max_runs (3) ticks" {
		t.Errorf("status: runs %d of %d, done %q", j.Runs, j.MaxRuns, j.Done)
	}
	if _, err := c.Trigger(ctx, "thrice", "test"); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "the manual run", func() bool { return len(log.of("thrice")) == 4 })
	if n, err := rdb.Get(ctx, keys[0]).Int(); err != nil || n != 3 {
		t.Errorf("count after a trigger %d (%v), want 3", n, err)
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// at: one tick on three replicas runs once, at its time, and no other
// tick follows.
func TestAtRunsOnceAcrossReplicas(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(3 * time.Second).Truncate(time.Second)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
worker: {shutdown_grace: 2s}
jobs:
  - name: once
    at: %q
    handler: {name: once}
  - name: clock
    schedule: "@every 1s"
    handler: {name: clock}
`, srv.Addr(), at.Format(time.RFC3339)))
	if err != nil {
		t.Fatal(err)
	}
	var log runLog
	reg := log.registry(t, "once", "clock")
	for _, id := range []string{"a1", "a2", "a3"} {
		replicaRun(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID(id))
	}
	poll.Require(t, 20*time.Second, "the one-shot run", func() bool { return len(log.of("once")) >= 1 })
	// three more seconds of ticks of the clock job: a second one-shot run
	// would have come by now
	poll.Require(t, 20*time.Second, "ticks of the clock job after it", func() bool {
		n := 0
		for _, r := range log.of("clock") {
			if r.Tick.After(at.Add(2 * time.Second)) {
				n++
			}
		}
		return n >= 2
	})
	runs := log.of("once")
	if len(runs) != 1 || !runs[0].Tick.Equal(at) {
		t.Fatalf("one-shot runs %+v, want one at %s", runs, at)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j := st.Jobs[0]; j.At != at.Format(time.RFC3339) || !j.Next.IsZero() || j.Done != "its one tick (at "+j.At+") has passed" {
		t.Errorf("status: at %q, next %s, done %q", j.At, j.Next, j.Done)
	}
	if v, err := rdb.Get(ctx, "baton:{once}:tick:"+strconv.FormatInt(at.UnixMilli(), 10)).Result(); err != nil && err != redis.Nil || v != "done" {
		t.Errorf("tick record %q (%v)", v, err)
	}
}
