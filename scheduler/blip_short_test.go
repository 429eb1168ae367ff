package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/scheduler"
)

// Schedule (a ~50 ms queue blip, job @every 1s, catchup skip):
//  1. the replica starts on a whole second, so its held-tick probe fires at
//     whole seconds (any phase works as long as the probe fires within the
//     ~50 ms the two failed dispatches take after a tick);
//  2. tick T's dispatch fails, is retried 10-50 ms later and fails again:
//     held at T+~50ms; the blip is over;
//  3. the next probe fires at T+1s: T's successor T+1s is due (Next(T) is
//     not after now), so T is not "current"; skip drops it, recorded missed.
//
// A blip of a few tens of ms drops a due tick of a skip job, 59 s before its
// starting deadline, with Redis reachable: "a sub-second blip drops nothing"
// does not hold for jobs whose period is not longer than the probe interval
// plus the time to fail twice.
func TestShortBlipKeepsTheTickDue(t *testing.T) {
	s := redistest.New(t)
	rec := newRecorder()
	t0 := now()
	due := t0.Add(2 * time.Second)
	id := "s@" + due.UTC().Format(time.RFC3339)
	var mu sync.Mutex
	fails := 0
	d := scheduler.DispatcherFunc(func(ctx context.Context, tk scheduler.Tick) error {
		mu.Lock()
		if tk.ID() == id && fails < 2 {
			fails++
			mu.Unlock()
			return errors.New("queue blip")
		}
		mu.Unlock()
		return rec.Dispatch(ctx, tk)
	})
	clock := scheduler.NewFakeClock(t0)
	jobs := []scheduler.Job{{Name: "s", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupSkip}}
	r := start(t, []*redis.Client{s.TestClient(t)}, jobs, d, scheduler.WithClock(clock), scheduler.WithMaxClockSkew(time.Hour))
	if err := clock.BlockUntil(4); err != nil {
		t.Fatal(err)
	}
	advanceUntil(t, clock, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fails == 2 && !clock.Now().Before(due.Add(4*time.Second)) && r.s.Stats().Held == 0
	}, "4 s past the tick")
	if n := len(rec.snapshot()[id]); n != 1 {
		t.Errorf("%s dispatched %d times after a ~50 ms blip; want 1 (stats %+v)", id, n, r.s.Stats())
	}
}
