package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// steppedClock is the real clock plus an offset that a test can step, as an
// NTP step or a VM restore steps a replica's clock.
type steppedClock struct{ off atomic.Int64 }

func (c *steppedClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *steppedClock) NewTimer(d time.Duration) scheduler.Timer {
	return scheduler.RealClock().NewTimer(d)
}

// whenDispatched records the real time of every dispatch.
type whenDispatched struct {
	next scheduler.Dispatcher
	mu   sync.Mutex
	at   map[string][]time.Time
}

func (w *whenDispatched) Dispatch(ctx context.Context, t scheduler.Tick) error {
	w.mu.Lock()
	w.at[t.ID()] = append(w.at[t.ID()], time.Now())
	w.mu.Unlock()
	return w.next.Dispatch(ctx, t)
}

// Schedule: two replicas, one healthy; the other's clock steps forward (10 s,
// then 1 h) a second after both start, between two of its skew checks. It
// fires the ticks of its future at once. A claim must answer "not yet" for
// a tick later than Redis TIME + the skew bound: otherwise the stepped
// replica dispatches them early and, when their records expire before they
// are due (a record margin of 0 and a short starting deadline), the healthy
// replica dispatches them again. No tick may be dispatched before it is due
// (less the skew bound, which the claim allows by design) or twice.
func TestNeverEarlyAfterAClockStep(t *testing.T) {
	for _, tc := range []struct {
		step     time.Duration
		margin   bool // record margin 0 and a 2s starting deadline
		deadline time.Duration
	}{
		{10 * time.Second, false, time.Minute},
		{10 * time.Second, true, 2 * time.Second},
		{time.Hour, false, time.Minute},
		{time.Hour, true, 2 * time.Second},
	} {
		name := fmt.Sprintf("step %v, margin 0 %v", tc.step, tc.margin)
		t.Run(name, func(t *testing.T) {
			s := redistest.New(t)
			rec := newRecorder()
			w := &whenDispatched{next: rec, at: map[string][]time.Time{}}
			jobs := []scheduler.Job{{Name: "e", Schedule: every(t, "@every 1s"), StartingDeadline: tc.deadline}}
			// a tick lease long enough for a dispatch and its commit on a
			// loaded machine: an owner slower than its lease is taken over
			// by design (the queue's task ID dedupes that), which is not
			// what this test is about
			opts := []scheduler.Option{scheduler.WithTickLeaseTTL(time.Second), scheduler.WithFollowerDelay(0)}
			if tc.margin {
				opts = append(opts, scheduler.WithRecordMargin(0))
			}
			mk := func() *locking.Client {
				l, err := locking.NewQuorum(universal(clients(t, []*redistest.Server{s})), locking.WithFreshDeployment())
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			var clock steppedClock
			startWith(t, mk(), jobs, w, append(opts, scheduler.WithReplica("stepped"), scheduler.WithClock(&clock))...)
			startWith(t, mk(), jobs, w, append(opts, scheduler.WithReplica("healthy"))...)
			time.Sleep(time.Second) // real time: Redis TIME decides what is due
			clock.off.Store(int64(tc.step))
			stepped := time.Now()
			time.Sleep(7 * time.Second) // past the stepped replica's next skew check
			w.mu.Lock()
			defer w.mu.Unlock()
			n := 0
			for id, ats := range w.at {
				if len(ats) > 1 {
					var who []string
					for _, tk := range rec.snapshot()[id] {
						who = append(who, fmt.Sprintf("%s fence %d", tk.Replica, tk.Fence))
					}
					t.Fatalf("tick %s dispatched %d times (%v) at %v (step at %v)", id, len(ats), who, ats, stepped)
				}
				due := rec.snapshot()[id][0].At
				if early := due.Sub(ats[0]); early > 500*time.Millisecond+50*time.Millisecond {
					t.Fatalf("tick %s dispatched %v before it was due", id, early.Round(time.Millisecond))
				}
				if ats[0].After(stepped) {
					n++
				}
			}
			if n < 3 {
				t.Fatalf("only %d ticks dispatched after the step: the healthy replica should go on", n)
			}
		})
	}
}

// A missed tick is recorded once, by the first replica to find it missed,
// so logs and counters count it once, not once per replica. Here both
// replicas' clocks run 10 s behind Redis (inside a generous skew bound):
// every tick they claim is past its 2 s starting deadline.
func TestMissedTickCountedOnce(t *testing.T) {
	s := redistest.New(t)
	jobs := []scheduler.Job{{Name: "m", Schedule: every(t, "@every 1s"), StartingDeadline: 2 * time.Second}}
	var clock steppedClock
	clock.off.Store(int64(-10 * time.Second))
	var rs []*replica
	for _, id := range []string{"r1", "r2"} {
		l, err := locking.NewQuorum(universal(clients(t, []*redistest.Server{s})), locking.WithFreshDeployment())
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, startWith(t, l, jobs, newRecorder(), scheduler.WithReplica(id), scheduler.WithClock(&clock),
			scheduler.WithMaxClockSkew(time.Hour), scheduler.WithFollowerDelay(100*time.Millisecond)))
	}
	time.Sleep(3500 * time.Millisecond) // real time: Redis TIME judges the deadline
	for _, r := range rs {
		r.stop()
	}
	keys, err := s.TestClient(t).Keys(context.Background(), "baton:{m}:tick:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var missed int64
	for _, r := range rs {
		missed += r.s.Stats().Missed
	}
	if len(keys) < 2 || missed != int64(len(keys)) {
		t.Fatalf("%d ticks recorded missed, counted %d times across the replicas", len(keys), missed)
	}
}
