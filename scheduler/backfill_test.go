package scheduler_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// backfiller is a scheduler made for Backfill (never Run) over masters.
func backfiller(t *testing.T, rdbs []*redis.Client, job scheduler.Job, d scheduler.Dispatcher) *scheduler.Scheduler {
	t.Helper()
	ms := make([]redis.UniversalClient, len(rdbs))
	for i, r := range rdbs {
		ms[i] = r
	}
	locks, err := locking.NewQuorum(ms, locking.WithPrefix("baton:lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close() })
	s, err := scheduler.New(locks, []scheduler.Job{job}, d, scheduler.WithTickLeaseTTL(time.Second), scheduler.WithMaxClockSkew(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Backfill dispatches the ticks recorded missed or paused and those with no
// record, whatever their age; a tick recorded done is left alone, and one
// leased by a claim that never finishes is dispatched once its lease ends.
func TestBackfillDispatchesOnlyTicksThatNeverRan(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	job := scheduler.Job{Name: "b", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	base := now().Truncate(time.Minute).Add(-10 * time.Minute)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
	key := func(i int) string { return "baton:{b}:tick:" + strconv.FormatInt(at(i).UnixMilli(), 10) }
	rdb.Set(ctx, key(0), "missed", time.Hour)
	rdb.Set(ctx, key(1), "paused", time.Hour)
	rdb.Set(ctx, key(2), "done", time.Hour)
	rdb.Set(ctx, key(4), "token-of-a-claim-that-died", 1500*time.Millisecond)
	rec := newRecorder()
	s := backfiller(t, []*redis.Client{rdb}, job, rec)
	bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.Backfill(bctx, "b", []time.Time{at(0), at(1), at(2), at(3), at(4)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]bool{at(0).UnixMilli(): true, at(1).UnixMilli(): true, at(3).UnixMilli(): true, at(4).UnixMilli(): true}
	if len(res.Dispatched) != 4 || len(res.Decided) != 1 || !res.Decided[0].Equal(at(2)) || len(res.Failed) != 0 {
		t.Fatalf("backfill: %+v", res)
	}
	for _, d := range res.Dispatched {
		if !want[d.UnixMilli()] {
			t.Errorf("dispatched %v", d)
		}
	}
	for id, ts := range rec.snapshot() {
		if len(ts) != 1 {
			t.Errorf("%s dispatched %d times", id, len(ts))
		}
	}
	for i := range 5 {
		if v := rdb.Get(ctx, key(i)).Val(); v != "done" {
			t.Errorf("tick %d recorded %q after the backfill, want done", i, v)
		}
	}
	// again: nothing left to do
	res, err = s.Backfill(bctx, "b", []time.Time{at(0), at(1), at(2), at(3), at(4)})
	if err != nil || len(res.Dispatched) != 0 || len(res.Decided) != 5 {
		t.Errorf("second backfill: %+v %v", res, err)
	}
}

// Backfills racing each other over the same window, on a quorum of three
// masters: every tick is dispatched exactly once.
func TestRacingBackfillsDispatchEachTickOnce(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t))
	}
	job := scheduler.Job{Name: "r", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	base := now().Truncate(time.Minute).Add(-60 * time.Minute)
	var ticks []time.Time
	for i := range 40 {
		ticks = append(ticks, base.Add(time.Duration(i)*time.Minute))
	}
	rec := newRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]scheduler.BackfillResult, 3)
	for i := range 3 {
		s := backfiller(t, rdbs, job, rec)
		wg.Go(func() {
			var err error
			results[i], err = s.Backfill(ctx, "r", ticks)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	dispatched := 0
	for _, r := range results {
		dispatched += len(r.Dispatched)
		if len(r.Failed) > 0 {
			t.Errorf("failed: %v (%s)", r.Failed, r.Reason)
		}
	}
	snap := rec.snapshot()
	if dispatched != len(ticks) || len(snap) != len(ticks) {
		t.Errorf("%d dispatched by the backfills, %d distinct ticks dispatched; want %d each", dispatched, len(snap), len(ticks))
	}
	for id, ts := range snap {
		if len(ts) != 1 {
			t.Errorf("%s dispatched %d times", id, len(ts))
		}
	}
}
