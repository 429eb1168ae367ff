package scheduler_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
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
// With a probe every second a blip of a few tens of ms dropped a due tick
// of a skip job, 59 s before its starting deadline. Held ticks are probed
// every 250 ms: T is claimed while it is still current, and runs once.
func TestShortBlipKeepsTheTickDue(t *testing.T) {
	s := redistest.New(t)
	rec := newRecorder()
	t0 := now()
	due := t0.Add(2 * time.Second)
	id := "s@" + due.UTC().Format(time.RFC3339)
	blip := failFirst(rec, 2, func(tk scheduler.Tick) bool { return tk.ID() == id })
	clk := clock.NewFake(t0)
	jobs := []scheduler.Job{{Name: "s", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupSkip}}
	r := start(t, []*redis.Client{s.TestClient(t)}, jobs, blip, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	if err := clk.BlockUntil(4); err != nil {
		t.Fatal(err)
	}
	advanceUntil(t, clk, func() bool {
		return blip.failed() == 2 && !clk.Now().Before(due.Add(4*time.Second)) && r.s.Stats().Held == 0
	}, "4 s past the tick")
	if n := len(rec.snapshot()[id]); n != 1 {
		t.Errorf("%s dispatched %d times after a ~50 ms blip; want 1 (stats %+v)", id, n, r.s.Stats())
	}
}
