package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
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
	blip := failFirst(rec, 2, func(scheduler.Tick) bool { return true })
	t0 := now()
	clk := clock.NewFake(t0.Add(100 * time.Millisecond))
	jobs := []scheduler.Job{{Name: "s", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupSkip}}
	r := start(t, []*redis.Client{s.TestClient(t)}, jobs, blip, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	if err := clk.BlockUntil(4); err != nil {
		t.Fatal(err)
	}
	due := jobs[0].Schedule.Next(clk.Now())
	clk.Set(due)
	// the blip is over after two failed calls; give it 10 s of fake time
	advanceUntil(t, clk, func() bool {
		return blip.failed() == 2 && !clk.Now().Before(due.Add(10*time.Second))
	}, "10 s past the tick")
	id := "s@" + due.UTC().Format(time.RFC3339)
	if n := len(rec.snapshot()[id]); n != 1 {
		t.Errorf("%s dispatched %d times after a sub-second queue blip, 50 s before its starting deadline; want 1 (stats %+v)", id, n, r.s.Stats())
	}
}

// blipDispatcher fails the first n dispatches of the ticks match selects
// ("queue blip"), then hands every dispatch to rec.
type blipDispatcher struct {
	rec   *recorder
	n     int
	match func(scheduler.Tick) bool
	mu    sync.Mutex
	fails int
}

func failFirst(rec *recorder, n int, match func(scheduler.Tick) bool) *blipDispatcher {
	return &blipDispatcher{rec: rec, n: n, match: match}
}

func (b *blipDispatcher) Dispatch(ctx context.Context, tk scheduler.Tick) error {
	b.mu.Lock()
	if b.match(tk) && b.fails < b.n {
		b.fails++
		b.mu.Unlock()
		return errors.New("queue blip")
	}
	b.mu.Unlock()
	return b.rec.Dispatch(ctx, tk)
}

// failed returns how many dispatches failed.
func (b *blipDispatcher) failed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fails
}
