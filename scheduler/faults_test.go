package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/histcheck"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// histDispatcher records every dispatch, and every tick not dispatched with
// its reason, into a history.
type histDispatcher struct{ h *histcheck.History }

func (d histDispatcher) Dispatch(_ context.Context, t scheduler.Tick) error {
	d.h.Ticked(histcheck.Tick{Job: t.Job, Tick: t.At, Event: "dispatched", Replica: t.Replica})
	return nil
}

func (d histDispatcher) NotDispatched(_ context.Context, t scheduler.Tick, paused bool, reason string) {
	if !paused {
		d.h.Ticked(histcheck.Tick{Job: t.Job, Tick: t.At, Event: "missed", Replica: t.Replica, Reason: reason})
	}
}

// observe reports every claim won, commit and release into h: the checker
// then also requires that a replica dispatches or commits a tick only while
// it holds its claim.
func observe(h *histcheck.History, leaseTTL time.Duration) scheduler.Option {
	return scheduler.WithObserver(func(kind, job string, tick time.Time, replica string) {
		now := time.Now()
		t := histcheck.Tick{Job: job, Tick: tick, Event: kind, Replica: replica, At: now}
		if kind == "claimed" {
			// the claim's lease runs from before the claim was sent: its
			// deadline is a little before now + ttl (an owner slower than
			// its lease is taken over by design)
			t.Until = now.Add(leaseTTL - 50*time.Millisecond)
		}
		h.Ticked(t)
	})
}

// Fault schedule: three replicas on one lock master, two of them with
// clocks that NTP steps while they run: one forward 10 s and back, one
// back 10 s and forward, a second apart, inside the skew bound (so they
// keep claiming) and, in a second run, beyond it (so they stop claiming
// and come back). Every tick of the window is dispatched exactly once or
// recorded missed with a reason, by the history checker.
func TestScheduleClockSteps(t *testing.T) {
	for _, skew := range []time.Duration{time.Minute, 2 * time.Second} {
		t.Run(fmt.Sprintf("skew bound %v", skew), func(t *testing.T) {
			t.Parallel() // real time, mostly waited: the cases overlap
			s := redistest.New(t)
			h := histcheck.New()
			h.MaxEarly = skew + time.Second // a claim may come the skew bound early, by design
			d := histDispatcher{h}
			jobs := []scheduler.Job{
				{Name: "a", Schedule: every(t, "@every 1s"), StartingDeadline: 20 * time.Second},
				{Name: "b", Schedule: every(t, "*/2 * * * * *"), StartingDeadline: 20 * time.Second},
				// a calendar spec (L goes through baton's calendar filter) that fires every day
				{Name: "c", Schedule: every(t, "*/3 * * 1-31,L * *"), StartingDeadline: 20 * time.Second},
			}
			// beyond the bound, a step must outlast a skew check (every 5 s)
			hold := 1500 * time.Millisecond
			if skew < 10*time.Second {
				hold = 6 * time.Second
			}
			clocks := make([]*steppedClock, 3)
			var reps []*replica
			for i := range clocks {
				clocks[i] = &steppedClock{}
				l, err := locking.NewQuorum(universal(clients(t, []*redistest.Server{s})), locking.WithFreshDeployment())
				if err != nil {
					t.Fatal(err)
				}
				reps = append(reps, startWith(t, l, jobs, d, scheduler.WithReplica(fmt.Sprintf("r%d", i)), scheduler.WithClock(clocks[i]), observe(h, time.Second),
					scheduler.WithMaxClockSkew(skew), scheduler.WithTickLeaseTTL(time.Second), scheduler.WithFollowerDelay(50*time.Millisecond)))
			}
			from := time.Now().Add(time.Second).Truncate(time.Second)
			steps := []struct {
				after time.Duration
				clock int
				off   time.Duration
			}{
				{time.Second, 1, 10 * time.Second}, {time.Second, 2, -10 * time.Second},
				{hold, 1, 0}, {time.Second, 2, 0},
				{3 * time.Second, 0, 0}, // steady again
			}
			for _, st := range steps {
				time.Sleep(st.after) // real time: Redis TIME decides what is due
				clocks[st.clock].off.Store(int64(st.off))
			}
			until := time.Now().Add(-2 * time.Second).Truncate(time.Second)
			time.Sleep(3 * time.Second) // real time: the window's last ticks fall due by Redis TIME and go out
			for _, j := range jobs {
				for _, tick := range scheduler.Ticks(j.Schedule, from.Add(-time.Nanosecond), until, 1000) {
					h.Ticked(histcheck.Tick{Job: j.Name, Tick: tick, Event: "expected"})
				}
			}
			if err := h.Check(); err != nil {
				t.Fatal(err)
			}
			if skew < 10*time.Second {
				for i, r := range reps[1:] {
					if r.s.Stats().SkewStops == 0 {
						t.Errorf("r%d's clock was 10 s off (bound %v) past a skew check: it never stopped claiming", i+1, skew)
					}
				}
			}
			c := h.Counts()
			if c.Expected < 6 {
				t.Fatalf("a window of %d ticks is too short: %+v", c.Expected, c)
			}
			t.Logf("%+v", c)
		})
	}
}
