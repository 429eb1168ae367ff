package locking_test

import (
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// untilFrac sleeps until the wall clock's fraction of a second is at least lo
// (and below lo+0.05), so a restart lands just before a second boundary.
func untilFrac(lo float64) {
	for {
		f := float64(time.Now().Nanosecond()) / 1e9
		if f >= lo && f < lo+0.05 {
			return
		}
		time.Sleep(2 * time.Millisecond) // real time: Redis counts uptime in whole seconds of the wall clock
	}
}

// Schedule: ttl == restart quarantine (allowed: validate only
// refuses ttl > quarantine). H1 takes the lock on the only master at
// wall-clock x.80; the master restarts empty at once, so its new process
// starts at about x.85. Redis computes uptime_in_seconds as
// floor(now) - floor(start), so it already reads 1 at (x+1).00, 0.15 s after
// the start. H2 first looks at the master 0.3 s after the restart and reads
// uptime 1: taken as the real uptime, the quarantine would end about 0.85 s
// too early and H2 would get the lock while H1's lease (no auto-extension,
// validity ~ttl) is still live (G3). Uptime is read as one second less.
func TestQuarantineReadsUptimeAsALowerBound(t *testing.T) {
	s := redistest.New(t)
	deploy(t, s)
	const ttl, q = 2 * time.Second, 2 * time.Second
	h1 := strict(t, clientsOf(t, s), q)
	ctx := testCtx(t)
	// warm h1 up (its first check) so the TryLock below is one round trip
	if l, err := h1.TryLock(ctx, "warm", ttl); err != nil {
		t.Fatal(err)
	} else {
		_ = l.Release(ctx)
	}
	untilFrac(0.80)
	l1, err := h1.TryLock(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	time.Sleep(300 * time.Millisecond) // real time: H2 first looks 0.3s after the restart, when Redis's uptime already reads 1
	h2 := strict(t, clientsOf(t, s), q)
	l2, at, seen := untilLocked(t, ctx, h2, "job", ttl)
	defer l2.Release(ctx)
	t.Logf("restart %v after H1 locked; H2 locked %v after the restart; H1's deadline %v after the restart; H2's first errors: %v",
		restarted.Sub(l1.Deadline().Add(-ttl)).Round(time.Millisecond), at.Sub(restarted).Round(time.Millisecond),
		l1.Deadline().Sub(restarted).Round(time.Millisecond), seen)
	if at.Before(l1.Deadline()) {
		t.Fatalf("G3: H2 locked %v before H1's validity deadline (H1 still holds: err=%v)", l1.Deadline().Sub(at).Round(time.Millisecond), l1.Err())
	}
}

// Schedule: a brand-new set of three masters, clients opted in to
// fresh deployments. H1's client marks them fresh and takes a lock (ttl 5s).
// Within the 3 s fresh window two of the three masters (a majority, not
// all) restart empty. H2's repair sees no master carrying a marker that
// counts (the third one's fresh marker is under 3 s old, so it is taken as
// "being marked now"), judges the set brand new, marks the two restarted
// masters fresh, and they vote at once: H2 gets the lock on them while H1's
// lease is live, although the fresh opt-in's risk is documented only for
// every master restarting at once (G3). A repair now waits for a fresh
// marking in progress to reach its master, and otherwise marks it restarted.
func TestFreshWindowNeverCoversARestartedMajority(t *testing.T) {
	servers := redistest.NewN(t, 3)
	const ttl = 5 * time.Second
	h1 := newClient(t, clientsOf(t, servers...), locking.WithRestartQuarantine(ttl))
	ctx := testCtx(t)
	l1, err := h1.TryLock(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers[:2] {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	h2 := newClient(t, clientsOf(t, servers...), locking.WithRestartQuarantine(ttl))
	l2, at, seen := untilLocked(t, ctx, h2, "job", ttl)
	defer l2.Release(ctx)
	if at.Before(l1.Deadline()) {
		t.Fatalf("G3: H2 locked %v before H1's validity deadline (H1 err=%v; H2's earlier errors %v)", l1.Deadline().Sub(at).Round(time.Millisecond), l1.Err(), seen)
	}
}
