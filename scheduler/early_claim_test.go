package scheduler_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// aheadClock is the real clock shifted forward by d (a replica whose clock
// is off Redis TIME by less than the skew bound).
type aheadClock struct{ d time.Duration }

func (c aheadClock) Now() time.Time { return time.Now().Add(c.d) }
func (c aheadClock) NewTimer(d time.Duration) scheduler.Timer {
	return scheduler.RealClock().NewTimer(d)
}

// early records, for the replica it wraps, the real time each tick was
// dispatched at.
type early struct {
	next scheduler.Dispatcher
	mu   sync.Mutex
	at   map[string]time.Time
	ch   chan scheduler.Tick
}

func (e *early) Dispatch(ctx context.Context, t scheduler.Tick) error {
	err := e.next.Dispatch(ctx, t)
	e.mu.Lock()
	e.at[t.ID()] = time.Now()
	e.mu.Unlock()
	select {
	case e.ch <- t:
	default:
	}
	return err
}

// Schedule: one lock master. Replica A's clock is 400 ms ahead of
// Redis TIME (inside the default 500 ms skew bound, so it keeps claiming);
// replica B's clock is right. A claims, dispatches and commits tick T at
// real T-0.4s (the claim script does not refuse early claims). The master then
// restarts empty at about T-0.3s, before T is due by its own clock: its
// process start (BORN) is before T, so the claim script's abstain rule
// (tick < BORN) does not cover T, although the record of T was lost with the
// old process. B claims T at T, waits out the quarantine (2 s), finds no
// record and dispatches T a second time (G1). A master now abstains for
// ticks due before its start plus the skew bound.
func TestEarlyClaimLostByRestartBeforeTickDue(t *testing.T) {
	s := redistest.New(t)
	deployFresh(t, []*redistest.Server{s})

	rec := newRecorder()
	jobs := []scheduler.Job{{Name: "r", Schedule: every(t, "@every 4s"), StartingDeadline: time.Minute}}
	mk := func() *locking.Client {
		l, err := locking.NewQuorum(universal(clients(t, []*redistest.Server{s})), locking.WithRestartQuarantine(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a := &early{next: rec, at: map[string]time.Time{}, ch: make(chan scheduler.Tick, 16)}
	startWith(t, mk(), jobs, a, scheduler.WithReplica("A"), scheduler.WithClock(aheadClock{400 * time.Millisecond}), scheduler.WithFollowerDelay(0))
	startWith(t, mk(), jobs, rec, scheduler.WithReplica("B"), scheduler.WithFollowerDelay(0))

	// the first tick A dispatches ahead of time
	var target scheduler.Tick
	timeout := time.After(20 * time.Second)
	for target.Job == "" {
		select {
		case tk := <-a.ch:
			a.mu.Lock()
			at := a.at[tk.ID()]
			a.mu.Unlock()
			if lead := tk.At.Sub(at); lead > 250*time.Millisecond {
				target = tk
				t.Logf("A dispatched %s %v before it was due", tk.ID(), lead.Round(time.Millisecond))
			}
		case <-timeout:
			t.Fatal("A never dispatched a tick ahead of time")
		}
	}
	// A commits: the tick's key on the master says "done"
	key := "baton:{r}:tick:" + strconv.FormatInt(target.At.UnixMilli(), 10)
	admin := s.TestClient(t)
	if !poll.Until(time.Until(target.At), func() bool { return admin.Get(context.Background(), key).Val() == "done" }) {
		t.Skipf("A's commit of %s not seen before it was due: schedule not reached", target.ID())
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if lead := time.Until(target.At); lead <= 0 {
		t.Skipf("restart finished %v after the tick was due: schedule not reached", -lead)
	} else {
		t.Logf("master restarted %v before %s was due", lead.Round(time.Millisecond), target.ID())
	}
	time.Sleep(time.Until(target.At.Add(4 * time.Second))) // real time: the tick falls due by Redis TIME, its claims end after
	ts := rec.snapshot()[target.ID()]
	if len(ts) != 1 {
		var who []string
		for _, x := range ts {
			who = append(who, x.Replica)
		}
		t.Fatalf("G1: tick %s dispatched %d times (by %v)", target.ID(), len(ts), who)
	}
}
