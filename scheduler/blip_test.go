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

// Schedule (a one-second blip of the queue Redis, catchup: skip):
//  1. job s (@every 1m, starting deadline 1m, catchup skip) comes due at T;
//  2. its enqueue fails (queue Redis blip), is retried ~100-300ms later and
//     fails again: the tick is held back as "an outage";
//  3. the queue answers again well within the starting deadline; the next
//     held-tick probe applies catchup skip to the one held tick: dropped,
//     recorded missed.
//
// G1 says at least one dispatch when a replica is alive within the starting
// deadline and the queue is reachable: here both hold for 59 s of the
// deadline, yet the tick is never dispatched. A blip of under a second is
// enough to lose a due tick of any skip job (it was not missed while no replica
// ran, which is what catchup governs).
func TestQueueBlipKeepsTheCurrentTick(t *testing.T) {
	s := redistest.New(t)
	rec := newRecorder()
	var mu sync.Mutex
	fails := 0
	d := scheduler.DispatcherFunc(func(ctx context.Context, tk scheduler.Tick) error {
		mu.Lock()
		if fails < 2 {
			fails++
			mu.Unlock()
			return errors.New("queue blip")
		}
		mu.Unlock()
		return rec.Dispatch(ctx, tk)
	})
	t0 := now()
	clock := scheduler.NewFakeClock(t0.Add(100 * time.Millisecond))
	jobs := []scheduler.Job{{Name: "s", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupSkip}}
	r := start(t, []*redis.Client{s.TestClient(t)}, jobs, d, scheduler.WithClock(clock), scheduler.WithMaxClockSkew(time.Hour))
	if err := clock.BlockUntil(4); err != nil {
		t.Fatal(err)
	}
	due := jobs[0].Schedule.Next(clock.Now())
	clock.Set(due)
	// the blip is over after two failed calls; give it 10 s of fake time
	advanceUntil(t, clock, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return fails == 2 && !clock.Now().Before(due.Add(10*time.Second))
	}, "10 s past the tick")
	id := "s@" + due.UTC().Format(time.RFC3339)
	if n := len(rec.snapshot()[id]); n != 1 {
		t.Errorf("%s dispatched %d times after a sub-second queue blip, 50 s before its starting deadline; want 1 (stats %+v)", id, n, r.s.Stats())
	}
}
