package locking_test

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// Held lists the locks held now: on how many masters, the shortest TTL and
// the fence; a released lock is gone from the list, and keys beside a lock
// (its fence, an election's leader record) are not locks.
func TestHeldListsLocks(t *testing.T) {
	servers := redistest.NewN(t, 3)
	c := newClient(t, clientsOf(t, servers...), locking.WithFreshDeployment())
	ctx := testCtx(t)
	a, err := c.TryLock(ctx, "report", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.TryLock(ctx, "odd*[name]", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.Election("leader", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	term, err := e.Campaign(ctx, "me")
	if err != nil {
		t.Fatal(err)
	}
	// a lock is granted once a quorum answered: the third master's grant
	// may still be on its way (a busy host), and Held says what is there
	var held []locking.HeldLock
	byName := map[string]locking.HeldLock{}
	poll.Require(t, 10*time.Second, "every lock on all three masters", func() bool {
		if held, err = c.Held(ctx); err != nil {
			t.Fatal(err)
		}
		clear(byName)
		for _, h := range held {
			byName[h.Name] = h
		}
		return byName["report"].Masters == 3 && byName["odd*[name]"].Masters == 3
	})
	if len(byName) != 3 {
		t.Fatalf("held: %+v, want report, odd*[name] and the election's lock", held)
	}
	if h := byName["report"]; h.Masters != 3 || h.Quorum != 2 || h.Fence < a.Fence() || h.TTL <= 5*time.Second || h.TTL > 10*time.Second {
		t.Errorf("report: %+v (lease fence %d)", h, a.Fence())
	}
	if h := byName["odd*[name]"]; h.Fence < b.Fence() || h.Masters != 3 {
		t.Errorf("a name with glob characters: %+v", h)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if held, err = c.Held(ctx); err != nil || len(held) != 1 || held[0].Name != "odd*[name]" {
		t.Errorf("after release: %+v, %v", held, err)
	}
	// a master down: listed from the others, and said
	if err := servers[0].Stop(); err != nil {
		t.Fatal(err)
	}
	held, err = c.Held(ctx)
	if err == nil || len(held) != 1 || held[0].Masters != 2 {
		t.Errorf("one master down: %+v, %v; want the lock on 2 masters and an error naming the third", held, err)
	}
}

// Shared locks are listed with their live shares: a read/write lock's
// readers and a fair semaphore's holders.
func TestHeldListsShares(t *testing.T) {
	srv := redistest.New(t)
	c := newClient(t, clientsOf(t, srv), locking.WithFreshDeployment())
	ctx := testCtx(t)
	m, _ := c.RWMutex("catalog")
	for range 2 {
		if _, err := m.TryRLock(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := c.FairSemaphore("renders", 3)
	if _, err := s.TryAcquire(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	held, err := c.Held(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]locking.HeldLock{}
	for _, h := range held {
		byName[h.Name] = h
	}
	if h := byName["rw:catalog"]; h.Shares != 2 || h.Masters != 1 || h.TTL <= 5*time.Second || h.Fence == 0 {
		t.Errorf("rw:catalog: %+v, want 2 shares", h)
	}
	if h := byName["fsem:renders"]; h.Shares != 1 {
		t.Errorf("fsem:renders: %+v, want 1 share", h)
	}
}

// A held lock whose fencing counter holds no counter is listed, and the
// error names the counter and its master instead of showing fence 0.
func TestHeldReportsCorruptFenceCounter(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "h", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	key := "baton:lock:{h}:fence"
	if err := rdb.Set(ctx, key, "1.5", 0).Err(); err != nil {
		t.Fatal(err)
	}
	held, err := c.Held(ctx)
	if len(held) != 1 || held[0].Name != "h" || held[0].Fence != 0 {
		t.Fatalf("Held = %+v, want lock h without a fence", held)
	}
	var ce *locking.CorruptError
	if !errors.Is(err, locking.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != key || ce.Addr != s.Addr() || ce.Value != "1.5" {
		t.Fatalf("Held error = %v, want ErrCorrupt naming %q on %s", err, key, s.Addr())
	}
}
