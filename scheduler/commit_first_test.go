package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Schedule: a job that runs in-process (CommitFirst: baton's local mode).
// Replica A owns a tick, starts its run, and loses its link to Redis at that
// moment; its lease expires; replica B, following up on the tick, claims it. If A recorded the
// tick only after the run started (its commit lost with the link), B owns
// it again and runs it a second time. A must record it, token-checked,
// before the run starts: then B finds it done. Every tick runs once.
func TestCommitFirstSurvivesLinkLostAfterRunStarts(t *testing.T) {
	s := redistest.New(t)
	p := redistest.NewTestProxy(t, s.Addr())
	rec := newRecorder()
	jobs := []scheduler.Job{{Name: "l", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, CommitFirst: true}}
	opts := []scheduler.Option{scheduler.WithTickLeaseTTL(200 * time.Millisecond), scheduler.WithFollowerDelay(300 * time.Millisecond)}
	viaProxy := s.TestClient(t, func(o *redis.Options) { o.Addr = p.Addr() })
	lockA, err := locking.New(viaProxy, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	lockB, err := locking.New(s.TestClient(t), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	cut := make(chan struct{})
	// A's runs: the first one cuts A off Redis as it starts
	a := scheduler.DispatcherFunc(func(ctx context.Context, tk scheduler.Tick) error {
		once.Do(func() {
			if err := p.Cut(); err != nil {
				t.Error(err)
			}
			close(cut)
		})
		return rec.Dispatch(ctx, tk)
	})
	startWith(t, lockA, jobs, a, append(opts, scheduler.WithReplica("A"))...)
	startWith(t, lockB, jobs, rec, append(opts, scheduler.WithReplica("B"))...)
	select {
	case <-cut:
	case <-time.After(20 * time.Second):
		t.Fatal("A never ran a tick")
	}
	cutAt := time.Now()
	for time.Since(cutAt) < 3*time.Second {
		time.Sleep(100 * time.Millisecond) // real time: leases expire by Redis's clock
	}
	n := 0
	for id, ts := range rec.snapshot() {
		if len(ts) != 1 {
			t.Fatalf("tick %s ran %d times (replicas %s and %s)", id, len(ts), ts[0].Replica, ts[len(ts)-1].Replica)
		}
		n++
	}
	if n < 3 {
		t.Fatalf("only %d ticks ran", n)
	}
}
