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

// taskQueue stands for the queue ticks are dispatched into, as baton's
// dispatcher uses asynq: the task of tick J@T has the ID J@T, and enqueuing
// it again while the queue keeps it (its Retention: the starting deadline,
// the tick lease ttl, twice the skew bound and a margin) is refused as a
// task ID conflict, which the dispatcher returns as ErrAlreadyDispatched.
// That is how an owner slower than its lease, whose tick another replica
// took over and dispatched too, still makes one task and one run. A tick
// dispatched again after its task is forgotten makes a second task. The
// task is kept here from its enqueue on (asynq counts the retention from the
// task's completion, later): the shortest the queue may keep it.
type taskQueue struct {
	retention time.Duration // of every task
	mu        sync.Mutex
	tasks     map[string][]task // by tick ID, in enqueue order
	refused   []task            // dispatches refused as task ID conflicts
}

// task is one enqueue of a tick, or one refused.
type task struct {
	tick scheduler.Tick
	at   time.Time // real time of the dispatch
}

func (q *taskQueue) Dispatch(_ context.Context, t scheduler.Tick) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	id := t.ID()
	if ts := q.tasks[id]; len(ts) > 0 && now.Sub(ts[len(ts)-1].at) < q.retention {
		q.refused = append(q.refused, task{t, now})
		return fmt.Errorf("enqueue %s: task ID conflict: %w", id, scheduler.ErrAlreadyDispatched)
	}
	q.tasks[id] = append(q.tasks[id], task{t, now})
	return nil
}

// Schedule: two replicas, one healthy; the other's clock steps forward (10 s,
// then 1 h) a second after both start, between two of its skew checks. It
// fires the ticks of its future at once. A claim must answer "not yet" for
// a tick later than Redis TIME + the skew bound: otherwise the stepped
// replica dispatches them early and, when their records expire before they
// are due (a record margin of 0 and a short starting deadline), the healthy
// replica dispatches them again, after the queue forgot their tasks. No tick
// may be dispatched before it is due (less the skew bound, which the claim
// allows by design), nor make two tasks.
//
// What the test does not count as a second dispatch: an owner slower than
// its tick lease (a loaded machine; the stepped replica's own claims of its
// future, thousands after a 1 h step, hold up its commit past the lease) is
// taken over by the other replica, whose dispatch finds the task there.
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
			t.Parallel() // real time, mostly waited: the cases overlap
			s := redistest.New(t)
			const leaseTTL, maxSkew = time.Second, 500 * time.Millisecond
			margin := time.Minute // the scheduler's record margin, and the queue's retention margin
			opts := []scheduler.Option{scheduler.WithTickLeaseTTL(leaseTTL), scheduler.WithMaxClockSkew(maxSkew), scheduler.WithFollowerDelay(0)}
			if tc.margin {
				margin = 0
				opts = append(opts, scheduler.WithRecordMargin(0))
			}
			q := &taskQueue{retention: tc.deadline + leaseTTL + 2*maxSkew + margin, tasks: map[string][]task{}}
			jobs := []scheduler.Job{{Name: "e", Schedule: every(t, "@every 1s"), StartingDeadline: tc.deadline}}
			mk := func() *locking.Client {
				l, err := locking.NewQuorum(universal(clients(t, []*redistest.Server{s})), locking.WithFreshDeployment())
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			var clock steppedClock
			stepped := startWith(t, mk(), jobs, q, append(opts, scheduler.WithReplica("stepped"), scheduler.WithClock(&clock))...)
			healthy := startWith(t, mk(), jobs, q, append(opts, scheduler.WithReplica("healthy"))...)
			time.Sleep(time.Second) // real time: Redis TIME decides what is due
			clock.off.Store(int64(tc.step))
			steppedAt := time.Now()
			time.Sleep(7 * time.Second) // real time: the stepped replica's next skew check against Redis TIME comes within this
			stepped.stop()
			healthy.stop()
			q.mu.Lock()
			defer q.mu.Unlock()
			for _, r := range q.refused {
				t.Logf("tick %s dispatched again by %s (fence %d), %v after its task was enqueued: refused by the queue",
					r.tick.ID(), r.tick.Replica, r.tick.Fence, r.at.Sub(q.tasks[r.tick.ID()][0].at).Round(time.Millisecond))
			}
			n := 0
			for id, ts := range q.tasks {
				if len(ts) > 1 {
					var who []string
					for _, tk := range ts {
						who = append(who, fmt.Sprintf("by %s fence %d at %v", tk.tick.Replica, tk.tick.Fence, tk.at))
					}
					t.Fatalf("tick %s enqueued as %d tasks (%v), the step at %v", id, len(ts), who, steppedAt)
				}
				if early := ts[0].tick.At.Sub(ts[0].at); early > maxSkew+50*time.Millisecond {
					t.Fatalf("tick %s dispatched %v before it was due", id, early.Round(time.Millisecond))
				}
				if ts[0].at.After(steppedAt) {
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
