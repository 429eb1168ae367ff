package scheduler_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/scheduler"
)

// Schedule (a catch-up beside the first live claim of the SAME job):
//  1. job c (@every 1s, catchup all, catchup_max 3, starting deadline 1m)
//     has mark t0-10s: the replica was down for 10 s, ticks t0-9s..t0 missed;
//  2. the replica starts at t0+100ms; its catch-up's mark reads are slow
//     (a slow master) and now run beside the first claims;
//  3. c's live tick t0+1s is claimed, dispatched and committed: the mark
//     becomes t0+1s;
//  4. the catch-up's mark reads return: mark t0+1s is after the catch-up's
//     "now" (t0+100ms), so it lists no tick at all.
//
// Policy "all" with catchup_max 3 must run t0-2s, t0-1s, t0 (and count the
// other 7 missed). With the catch-up beside the claims, none is run and none is
// counted: the outage's ticks vanish silently.
func TestCatchupReadsMarksBeforeLiveClaims(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	t0 := now()
	rdb.Set(context.Background(), "baton:{c}:mark", t0.Add(-10*time.Second).UnixMilli(), 0)
	b := blockMarks{release: make(chan struct{})}
	hooked := s.TestClient(t)
	hooked.AddHook(b)
	var once sync.Once
	release := func() { once.Do(func() { close(b.release) }) }
	rec := newRecorder()
	clk := clock.NewFake(t0.Add(100 * time.Millisecond))
	jobs := []scheduler.Job{
		{Name: "c", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, Catchup: scheduler.CatchupAll, CatchupMax: 3},
	}
	r := start(t, []*redis.Client{hooked}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	t.Cleanup(release)
	if err := clk.BlockUntil(3); err != nil { // membership, skew, held ticks: the loop waits for the marks
		t.Fatal(err)
	}
	clk.Set(t0.Add(time.Second))
	live := "c@" + t0.Add(time.Second).UTC().Format(time.RFC3339)
	// while the marks are not read, c's live tick must wait (a claim now
	// would advance the mark the catch-up has yet to read)
	poll.Until(time.Second, func() bool { return len(rec.snapshot()[live]) != 0 })
	release()
	waitFor(t, func() bool { return len(rec.snapshot()[live]) == 1 }, "c's live tick t0+1s")
	// give the catch-up's follower claims time to fire (follower delay 500ms)
	want := []string{}
	for _, sec := range []int{-2, -1, 0} {
		want = append(want, "c@"+t0.Add(time.Duration(sec)*time.Second).UTC().Format(time.RFC3339))
	}
	poll.Until(5*time.Second, func() bool {
		clk.Advance(25 * time.Millisecond) // 5 ms of real time between steps
		snap := rec.snapshot()
		for _, id := range want {
			if len(snap[id]) == 0 {
				return false
			}
		}
		return true
	})
	snap := rec.snapshot()
	for _, id := range want {
		if len(snap[id]) != 1 {
			t.Errorf("%s dispatched %d times, want 1 (catchup all, max 3)", id, len(snap[id]))
		}
	}
	st := r.s.Stats()
	if st.Missed != 7 || st.CaughtUp != 3 {
		t.Errorf("missed %d caught up %d; want 7 and 3", st.Missed, st.CaughtUp)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Two replicas start together after every replica was down for 15 ticks:
// both read the same mark and find the same ticks missed. They are logged
// and counted once across the two (14: the newest is caught up), not once
// per replica.
func TestCatchupMissesCountedOnce(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	n := now().Add(3 * time.Second) // ahead of Redis's clock, as in TestCatchupPolicies
	rdb.Set(context.Background(), "baton:{c}:mark", n.Add(-15*time.Second).UnixMilli(), 0)
	rec := newRecorder()
	clk := clock.NewFake(n.Add(100 * time.Millisecond))
	jobs := []scheduler.Job{{Name: "c", Schedule: every(t, "@every 1s"), StartingDeadline: 5500 * time.Millisecond,
		Catchup: scheduler.CatchupLatest}}
	a := start(t, []*redis.Client{rdb}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour), scheduler.WithReplica("a"))
	b := start(t, []*redis.Client{srv.TestClient(t)}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour), scheduler.WithReplica("b"))
	rec.waitAdvancing(t, clk, 1)
	a.stop()
	b.stop()
	if got := rec.snapshot(); len(got) != 1 {
		t.Fatalf("caught up %v, want the newest tick once", got)
	}
	if sa, sb := a.s.Stats(), b.s.Stats(); sa.Missed+sb.Missed != 14 {
		t.Errorf("missed counted %d (a) + %d (b), want 14 in all", sa.Missed, sb.Missed)
	}
}
