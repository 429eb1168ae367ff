package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/scheduler"
)

// Schedule (queue outage while replica A stays up; replica B starts during it):
//  1. job s (@every 1s, deadline 1m, catchup skip); A dispatches and commits
//     t0+1s (mark = t0+1s);
//  2. the queue Redis fails (lock masters fine): A's ticks t0+2s.. fail twice
//     and are held; each probe claims the non-current ones as dropped, which
//     records them "missed" in Redis and A counts them (first = 1);
//  3. B (re)starts at ~t0+6.6s: the mark is still t0+1s (a "missed" record
//     does not advance it); B's catch-up lists t0+2s..t0+6s, skip drops all,
//     firstToCount's SET NX on counted:<t0+1s> is new -> B logs and counts them
//     again.
//
// The misses of t0+2s..t0+5s are counted by A (claim first=1) and by B
// (firstToCount): two dedup mechanisms that do not know of one another.
func TestOutageMissesNotCountedAgainByAStartingReplica(t *testing.T) {
	s := redistest.New(t)
	rec := newRecorder()
	var queueDown atomic.Bool
	var mu sync.Mutex
	failed := map[string]int{}
	d := scheduler.DispatcherFunc(func(ctx context.Context, tk scheduler.Tick) error {
		if queueDown.Load() {
			mu.Lock()
			failed[tk.ID()]++
			mu.Unlock()
			return errors.New("queue down")
		}
		return rec.Dispatch(ctx, tk)
	})
	jobs := []scheduler.Job{{Name: "s", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupSkip}}
	t0 := now()
	clk := clock.NewFake(t0.Add(100 * time.Millisecond))
	a := start(t, []*redis.Client{s.TestClient(t)}, jobs, d, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour), scheduler.WithReplica("a"))
	if err := clk.BlockUntil(4); err != nil {
		t.Fatal(err)
	}
	clk.Advance(900 * time.Millisecond)
	rec.wait(t, 1)
	rdb := s.TestClient(t)
	waitFor(t, func() bool {
		return rdb.Get(context.Background(), fmt.Sprintf("baton:{s}:tick:%d", t0.Add(time.Second).UnixMilli())).Val() == "done"
	}, "t0+1s committed")
	queueDown.Store(true)
	advanceUntil(t, clk, func() bool {
		if clk.Now().Before(t0.Add(6600 * time.Millisecond)) {
			return false
		}
		return a.s.Stats().Missed >= 4
	}, "A to drop t0+2s..t0+5s")
	missedA := a.s.Stats().Missed
	// B starts now (its dispatcher sees the same queue outage)
	b := start(t, []*redis.Client{s.TestClient(t)}, jobs, d, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour), scheduler.WithReplica("b"))
	poll.Until(3*time.Second, func() bool { return b.s.Stats().Missed != 0 })
	missedB := b.s.Stats().Missed
	// distinct ticks of the outage not dispatched so far: t0+2s .. now
	distinct := 0
	for at := t0.Add(2 * time.Second); !at.After(clk.Now()); at = at.Add(time.Second) {
		if len(rec.snapshot()["s@"+at.UTC().Format(time.RFC3339)]) == 0 {
			distinct++
		}
	}
	t.Logf("missed counted by A %d (at B's start), by B %d, total now %d; distinct undispatched ticks %d",
		missedA, missedB, a.s.Stats().Missed+missedB, distinct)
	if a.s.Stats().Missed+missedB > int64(distinct) {
		t.Errorf("misses counted %d times (A %d + B %d) for %d distinct ticks: counted twice",
			a.s.Stats().Missed+missedB, a.s.Stats().Missed, missedB, distinct)
	}
}
