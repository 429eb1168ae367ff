package locking_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// Schedule (G3, one master): the master has been up longer than the
// quarantine; H1 holds a lock; the master is FLUSHALLed (same process, no
// reconnect). The acquire script sees the marker gone and grants nothing,
// the client repairs the master, and the quarantine is read off the uptime,
// which is already past it: the master votes at once and H2 gets the lock
// while H1's lease is live. The quarantine is skipped because uptime only
// proves that the *process* is old, not that its keyspace is.
func TestFlushOfAnOldMasterQuarantinesFromTheFlush(t *testing.T) {
	s := redistest.New(t)
	deploy(t, s)
	const ttl, q = 2 * time.Second, 2 * time.Second
	time.Sleep(q + 1500*time.Millisecond) // real time: Redis's uptime (lower bound) past q
	ctx := testCtx(t)
	h1 := strict(t, clientsOf(t, s), q)
	l1, err := h1.TryLock(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.TestClient(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h2 := strict(t, clientsOf(t, s), q)
	l2, at, seen := untilLocked(t, ctx, h2, "job", ttl)
	defer l2.Release(ctx)
	if at.Before(l1.Deadline()) {
		t.Fatalf("G3: H2 locked %v before H1's deadline after FLUSHALL (H1 err %v); H2's first errors %v; fences %d then %d",
			l1.Deadline().Sub(at).Round(time.Millisecond), l1.Err(), seen, l1.Fence(), l2.Fence())
	}
}

// Schedule (G3, three masters, fresh opt-in left on): a fresh deployment
// marks A, B, C; H1 holds a lock on all three; A and B restart empty while C
// is unreachable. A client with the fresh opt-in repairs A: of the masters
// that answer (A, B: a quorum) none carries a marker, so the set is taken as
// brand-new although C carries one: A and B are marked fresh, vote at once,
// and H2 gets the lock on {A, B} while H1's lease is live.
func TestFreshNeedsEveryMasterToAnswer(t *testing.T) {
	servers := redistest.NewN(t, 3)
	px := redistest.NewTestProxy(t, servers[2].Addr())
	deploy(t, servers...)
	ctx := testCtx(t)
	const ttl, q = 4 * time.Second, 4 * time.Second
	h1 := strict(t, clientsOf(t, servers...), q)
	// wait out the quarantine of the brand-new (fresh-marked: none) set
	l1, err := h1.TryLock(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := px.Cut(); err != nil {
		t.Fatal(err)
	}
	for _, s := range servers[:2] {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	rdbs := []*redis.Client{servers[0].TestClient(t), servers[1].TestClient(t), through(t, servers[2], px)}
	h2 := newClient(t, rdbs, locking.WithRestartQuarantine(q)) // fresh opt-in, as the deployment's config still says
	l2, at, seen := untilLocked(t, ctx, h2, "job", ttl)
	defer l2.Release(ctx)
	if at.Before(l1.Deadline()) {
		t.Fatalf("G3: H2 locked %v before H1's deadline (A, B restarted empty, C marked but unreachable); H2's first errors %v; fences %d then %d",
			l1.Deadline().Sub(at).Round(time.Millisecond), seen, l1.Fence(), l2.Fence())
	}
}
