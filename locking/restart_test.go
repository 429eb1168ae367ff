package locking_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// Each test here is an event schedule that broke a guarantee before the
// lock library checked its masters' identity: a master restarted under a
// live holder, every master restarted at once, a master reloaded from an
// old snapshot. The clients are "strict": they do not opt in to fresh
// deployments, as in production; the servers are first marked by a fresh
// client, as a first deployment would be.

// strict is a client without the fresh-deployment opt-in.
func strict(t *testing.T, rdbs []*redis.Client, q time.Duration, opts ...locking.Option) *locking.Client {
	t.Helper()
	ms := make([]redis.UniversalClient, len(rdbs))
	for i, r := range rdbs {
		ms[i] = r
	}
	c, err := locking.NewQuorum(ms, append([]locking.Option{locking.WithMasterTimeout(time.Second), locking.WithRestartQuarantine(q)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// deploy marks brand-new servers as a first deployment would.
func deploy(t *testing.T, servers ...*redistest.Server) {
	t.Helper()
	c := newClient(t, clientsOf(t, servers...))
	if err := c.Prepare(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(testCtx(t), "deploy", time.Second)
	if err != nil {
		t.Fatalf("first lock on a fresh deployment: %v", err)
	}
	_ = l.Release(testCtx(t))
}

// untilLocked retries TryLock every 20ms until it succeeds (bounded by ctx)
// and returns the lease and when it was granted.
func untilLocked(t *testing.T, ctx context.Context, c *locking.Client, key string, ttl time.Duration) (*locking.Lease, time.Time, []error) {
	t.Helper()
	var seen []error
	for {
		l, err := c.TryLock(ctx, key, ttl)
		if err == nil {
			return l, time.Now(), seen
		}
		if len(seen) < 5 {
			seen = append(seen, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("never locked %q: %v", key, err)
		}
		time.Sleep(20 * time.Millisecond) // real time: the quarantine and H1's lease end on Redis's clock; H2 tries every 20ms
	}
}

// Schedule: H1 holds a lock with seconds of validity left; the only master
// restarts empty; H2 tries at once and keeps trying. H2 must not get the
// lock before H1's lease has ended (H1 learns first, G3), and its fence
// must be above H1's (G4).
func TestSingleMasterRestartUnderLiveHolder(t *testing.T) {
	s := redistest.New(t)
	deploy(t, s)
	const ttl, q = 2 * time.Second, 3 * time.Second
	h1 := strict(t, clientsOf(t, s), q)
	h2 := strict(t, clientsOf(t, s), q)
	ctx := testCtx(t)
	l1, err := h1.TryLock(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	l2, at, seen := untilLocked(t, ctx, h2, "job", ttl)
	defer l2.Release(ctx)
	if l1.Err() == nil {
		t.Fatalf("H2 got the lock while H1's lease was live (deadline in %v); H2's earlier answers: %v", time.Until(l1.Deadline()), seen)
	}
	if at.Before(l1.Deadline()) {
		t.Fatalf("H2 locked at %v, before H1's deadline %v", at, l1.Deadline())
	}
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("fence %d after %d", l2.Fence(), l1.Fence())
	}
	if len(seen) == 0 || !errors.Is(seen[0], locking.ErrUnavailable) || errors.Is(seen[0], locking.ErrNotObtained) {
		t.Fatalf("H2's first attempt after the restart = %v, want ErrUnavailable only", seen)
	}
	t.Logf("H2 kept out until %v after H1's deadline: %v", at.Sub(l1.Deadline()).Round(time.Millisecond), seen[0])
}

// Schedule: every master restarts empty at once (a compose restart). Nothing
// tells that from a brand-new set, so by default the set waits out the
// quarantine: H1's lease, still valid at the restart, ends before H2 gets
// the lock.
func TestAllMastersRestartedWaitOutQuarantine(t *testing.T) {
	servers := redistest.NewN(t, 3)
	deploy(t, servers...)
	const ttl, q = 2 * time.Second, 3 * time.Second
	h1 := strict(t, clientsOf(t, servers...), q)
	h2 := strict(t, clientsOf(t, servers...), q)
	ctx := testCtx(t)
	l1, err := h1.Lock(ctx, "job", ttl)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		if err := s.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	restarted := time.Now()
	l2, at, _ := untilLocked(t, ctx, h2, "job", ttl)
	defer l2.Release(ctx)
	if err := l1.Err(); err == nil {
		t.Fatalf("H2 got the lock %v after the restart while H1 still believes it holds it", at.Sub(restarted))
	}
	if !at.After(l1.Deadline()) {
		t.Fatalf("H2 locked before H1's deadline")
	}
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("fence %d after %d", l2.Fence(), l1.Fence())
	}
	t.Logf("H2 locked %v after the restart (quarantine %v); H1 ended: %v", at.Sub(restarted).Round(time.Millisecond), q, l1.Err())
}

// With the fresh-deployment opt-in, the same all-masters restart is taken as
// a brand-new set: it votes at once (the documented trade).
func TestFreshDeploymentVotesAtOnce(t *testing.T) {
	servers := redistest.NewN(t, 3)
	c := strict(t, clientsOf(t, servers...), time.Minute, locking.WithFreshDeployment())
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "job", time.Second)
	if err != nil {
		t.Fatalf("fresh deployment: %v", err)
	}
	_ = l.Release(ctx)
	// without the opt-in, a brand-new set waits: the servers are up for
	// less than the quarantine
	fresh := redistest.NewN(t, 3)
	waits := strict(t, clientsOf(t, fresh...), time.Minute)
	if _, err := waits.TryLock(ctx, "job", time.Second); !errors.Is(err, locking.ErrUnavailable) || !strings.Contains(err.Error(), "quarantine") {
		t.Fatalf("new set without opt-in: TryLock = %v, want quarantine", err)
	}
}

// Schedule: counters at F0 on A, B, C; A saves a snapshot; five locks on
// {A, B}; A crashes and comes back from the snapshot (marker included, its
// counters five behind); a lock on {A, C} would find A and C agreeing on
// F0+1. A must be kept out until repaired and quarantined, and the fence
// must never go back. The reload also forgot a lock held on A: it must not
// be granted again while its holder is live.
func TestStaleSnapshotReload(t *testing.T) {
	servers := redistest.NewN(t, 3)
	deploy(t, servers...)
	const ttl, q = 2 * time.Second, 3 * time.Second
	h1 := strictVia(t, servers, q)
	h2 := strictVia(t, servers, q)
	ctx := testCtx(t)

	l, err := h1.TryLock(ctx, "inv", ttl)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if err := servers[0].Save(); err != nil {
		t.Fatal(err)
	}
	cut(t, h1.proxies[2]) // H1 sees {A, B}
	var last int64
	for range 5 {
		l, err := h1.TryLock(ctx, "inv", ttl)
		if err != nil {
			t.Fatal(err)
		}
		last = l.Fence()
		_ = l.Release(ctx)
	}
	held, err := h1.TryLock(ctx, "held", ttl) // on {A, B}; A will forget it
	if err != nil {
		t.Fatal(err)
	}
	if err := servers[0].RestartFromSnapshot(); err != nil {
		t.Fatal(err)
	}
	cut(t, h2.proxies[1]) // H2 sees {A, C}
	if _, err := h2.TryLock(ctx, "inv", ttl); err == nil {
		t.Fatal("H2 locked through a master reloaded from an old snapshot")
	}
	lh, at, _ := untilLocked(t, ctx, h2.Client, "held", ttl)
	if held.Err() == nil || at.Before(held.Deadline()) {
		t.Fatalf("H2 got the forgotten lock while its holder's lease was live")
	}
	_ = lh.Release(ctx)
	l2, _, _ := untilLocked(t, ctx, h2.Client, "inv", ttl)
	if l2.Fence() <= last {
		t.Fatalf("fence %d after %d: went back with the snapshot", l2.Fence(), last)
	}
	_ = l2.Release(ctx)
}

// A master flushed while it runs (FLUSHALL: same process, no reconnect)
// grants nothing until repaired: the acquire script reads the marker.
func TestFlushedMasterGrantsNothing(t *testing.T) {
	s := redistest.New(t)
	deploy(t, s)
	c := strict(t, clientsOf(t, s), 2*time.Second)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "job", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.TestClient(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "job", time.Second); err == nil {
		t.Fatal("a flushed master granted a lock whose holder is live")
	}
	l2, at, _ := untilLocked(t, ctx, c, "job", time.Second)
	if l.Err() == nil || at.Before(l.Deadline()) {
		t.Fatal("granted again while the first lease was live")
	}
	_ = l2.Release(ctx)
}

// Release tells the truth: a key gone on a majority of masters (expired,
// evicted, restarted) is ErrNotHeld and ErrLost, not success.
func TestReleaseAfterKeyVanishedOnMajority(t *testing.T) {
	servers := redistest.NewN(t, 3)
	// every connection the clients dial is counted: a release resent over
	// a new connection (one failed under a loaded machine) answers 0 for
	// its own earlier success, and counts as released (lease.go)
	var dials atomic.Int64
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t, func(o *redis.Options) {
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
		}))
	}
	c := newClient(t, rdbs)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "gone", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	heldEverywhere(t, ctx, servers, "baton:lock:{gone}")
	for _, s := range servers[:2] {
		if err := s.TestClient(t).Del(ctx, "baton:lock:{gone}").Err(); err != nil {
			t.Fatal(err)
		}
	}
	before := dials.Load()
	err = l.Release(ctx)
	if err == nil && dials.Load() > before {
		return // resent over a new connection: counted as released, as documented
	}
	if !errors.Is(err, locking.ErrNotHeld) || !errors.Is(err, locking.ErrLost) {
		t.Fatalf("Release = %v, want ErrNotHeld and ErrLost (connections dialed during it: %d)", err, dials.Load()-before)
	}
}

// Schedule: every call runs over a newly dialed connection (the pool's
// connections expire at once, as a pool that grows under load dials), the
// key is deleted on two of three masters, and Release runs. No connection
// failed, so no command was sent twice: a 0 is the truth, and Release says
// the lock was lost rather than released.
func TestReleaseOverNewConnectionsStillSeesVanishedKey(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t, func(o *redis.Options) { o.ConnMaxLifetime = time.Nanosecond }))
	}
	c := newClient(t, rdbs)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "grown", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	heldEverywhere(t, ctx, servers, "baton:lock:{grown}")
	for _, s := range servers[:2] {
		if err := s.TestClient(t).Del(ctx, "baton:lock:{grown}").Err(); err != nil {
			t.Fatal(err)
		}
	}
	err = l.Release(ctx)
	if !errors.Is(err, locking.ErrNotHeld) || !errors.Is(err, locking.ErrLost) {
		t.Fatalf("Release = %v, want ErrNotHeld and ErrLost", err)
	}
}

// Schedule: the release reaches Redis and runs, its reply is lost, the
// connection breaks, and go-redis sends it again on a new connection, which
// finds the key gone. That is this lease's own release, not an expiry.
func TestReleaseResentAfterLostReply(t *testing.T) {
	s := redistest.New(t)
	p := redistest.NewTestProxy(t, s.Addr())
	// go-redis's default: a command whose connection broke is sent again
	// (here after 200ms, once the test has restored the proxy)
	rdb := s.TestClient(t, func(o *redis.Options) {
		o.Addr, o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = p.Addr(), 3, 200*time.Millisecond, 300*time.Millisecond
	})
	c := newClient(t, []*redis.Client{rdb})
	raw := s.TestClient(t)
	ctx := testCtx(t)
	for range 2 { // the second time, every script is loaded
		l, err := c.TryLock(ctx, "r", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.TryLock(ctx, "r", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CloseAfter(0, false); err != nil { // a reply breaks its connection
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- l.Release(ctx) }()
	poll.Require(t, 30*time.Second, "the release to run", func() bool {
		n, err := raw.Exists(ctx, "baton:lock:{r}").Result()
		return err == nil && n == 0
	})
	// the release ran and its reply was lost with the connection; go-redis
	// sends it again on a new one, which answers
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Release after a lost reply = %v, want nil (its own earlier release)", err)
	}
}

// Extensions of one lease run in order: whatever the interleaving of
// concurrent Extend calls with different ttls, the deadline is never later
// than the key's expiry on a quorum of masters.
func TestRacingExtendsKeepDeadlineWithinExpiry(t *testing.T) {
	servers := redistest.NewN(t, 3)
	c := newClient(t, clientsOf(t, servers...), locking.WithRestartQuarantine(time.Minute))
	raws := clientsOf(t, servers...)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "x", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for round := range 30 {
		ttls := []time.Duration{20 * time.Second, 2 * time.Second, 10 * time.Second}
		errs := make(chan error, len(ttls))
		for _, ttl := range ttls {
			go func() { errs <- l.Extend(ctx, ttl) }()
		}
		for range ttls {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		var expiries []time.Time
		for _, r := range raws {
			ms, err := r.PTTL(ctx, "baton:lock:{x}").Result()
			if err != nil {
				t.Fatal(err)
			}
			expiries = append(expiries, time.Now().Add(ms))
		}
		held := 0
		for _, e := range expiries {
			if !e.Before(l.Deadline()) {
				held++
			}
		}
		if held < c.Quorum() {
			t.Fatalf("round %d: deadline %v is later than the key's expiry on %d of 3 masters", round, time.Until(l.Deadline()).Round(time.Millisecond), 3-held)
		}
	}
}

// A fair waiter whose client closes leaves the queue: the next waiter gets
// the lock at the release, not a ttl later.
func TestFairQueueClosedHead(t *testing.T) {
	s := redistest.New(t)
	const ttl = 3 * time.Second
	holder := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l, err := holder.Lock(ctx, "f", ttl, locking.WithFair())
	if err != nil {
		t.Fatal(err)
	}
	ghost := newClient(t, clientsOf(t, s))
	ghostDone := make(chan error, 1)
	go func() {
		_, err := ghost.Lock(ctx, "f", ttl, locking.WithFair())
		ghostDone <- err
	}()
	raw := s.TestClient(t)
	queued := func() bool { n, err := raw.LLen(ctx, "baton:lock:{f}:q").Result(); return err == nil && n > 0 }
	poll.Require(t, 30*time.Second, "the ghost to queue", queued) // the ghost queues first
	_ = ghost.Close()
	if err := <-ghostDone; !errors.Is(err, locking.ErrClosed) {
		t.Fatalf("ghost Lock = %v, want ErrClosed", err)
	}
	next := newClient(t, clientsOf(t, s))
	got := make(chan time.Time, 1)
	go func() {
		if l, err := next.Lock(ctx, "f", ttl, locking.WithFair()); err == nil {
			got <- time.Now()
			_ = l.Release(ctx)
		}
	}()
	poll.Require(t, 30*time.Second, "the next waiter to queue", queued)
	released := time.Now()
	_ = l.Release(ctx)
	select {
	case at := <-got:
		if d := at.Sub(released); d > time.Second {
			t.Fatalf("next waiter got the lock %v after the release", d)
		}
	case <-time.After(2 * ttl):
		t.Fatal("next waiter never got the lock")
	}
}

// A 1s-ttl waiter behind a 10s-ttl holder stays registered as long as it
// waits, so the release wakes it at once.
func TestShortTTLWaiterBehindLongHolder(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s), locking.WithRestartQuarantine(time.Minute))
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "w", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		if l, err := c.Lock(ctx, "w", time.Second); err == nil {
			got <- time.Now()
			_ = l.Release(ctx)
		}
	}()
	time.Sleep(4 * time.Second) // real time: longer than the waiter's own 2 x ttl + 1s, which Redis's clock ends
	released := time.Now()
	_ = l.Release(ctx)
	select {
	case at := <-got:
		if d := at.Sub(released); d > 500*time.Millisecond {
			t.Fatalf("waiter woken %v after the release", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter never got the lock")
	}
}

// TryLock with WithFair does not take a free key while a live fair waiter
// heads the queue.
func TestTryLockFairRespectsQueueHead(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	raw := s.TestClient(t)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "h", 2*time.Second, locking.WithFair())
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if l, err := c.Lock(wctx, "h", 2*time.Second, locking.WithFair()); err == nil {
			_ = l.Release(ctx)
		}
	}()
	poll.Require(t, 30*time.Second, "the waiter to queue", func() bool {
		n, err := raw.LLen(ctx, "baton:lock:{h}:q").Result()
		return err == nil && n > 0
	})
	// the holder's key vanishes (as at its expiry) while the waiter sleeps
	if err := raw.Del(ctx, "baton:lock:{h}").Err(); err != nil {
		t.Fatal(err)
	}
	if l2, err := c.TryLock(ctx, "h", 2*time.Second, locking.WithFair()); err == nil {
		_ = l2.Release(ctx)
		t.Fatal("fair TryLock jumped the queue")
	} else if !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("fair TryLock = %v, want ErrNotObtained", err)
	}
	cancel()
	<-waited
	_ = l.Release(ctx)
}

// Errors say what happened: Redis failing or slow is ErrUnavailable and
// never ErrNotObtained; a lock held by someone else is ErrNotObtained and
// never ErrUnavailable.
func TestErrorClasses(t *testing.T) {
	ctx := testCtx(t)
	unavailable := func(t *testing.T, err error) {
		t.Helper()
		if !errors.Is(err, locking.ErrUnavailable) || errors.Is(err, locking.ErrNotObtained) {
			t.Fatalf("err = %v, want ErrUnavailable and not ErrNotObtained", err)
		}
		if !strings.HasPrefix(err.Error(), "locking: unavailable: key \"k\"") {
			t.Fatalf("err text %q, want it to start with what happened (locking: unavailable: key \"k\")", err)
		}
	}
	t.Run("held", func(t *testing.T) {
		s := redistest.New(t)
		c := newClient(t, clientsOf(t, s))
		l, err := c.TryLock(ctx, "k", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		_, err = c.TryLock(ctx, "k", time.Second)
		if !errors.Is(err, locking.ErrNotObtained) || errors.Is(err, locking.ErrUnavailable) {
			t.Fatalf("err = %v, want ErrNotObtained only", err)
		}
		if !strings.HasPrefix(err.Error(), "locking: not obtained: key \"k\"") || !strings.Contains(err.Error(), "held by another client") {
			t.Fatalf("err text %q, want locking: not obtained: key \"k\" ... held by another client", err)
		}
	})
	t.Run("killed", func(t *testing.T) {
		s := redistest.New(t)
		c := newClient(t, clientsOf(t, s))
		deployed, err := c.TryLock(ctx, "k", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = deployed.Release(ctx)
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
		_, err = c.TryLock(ctx, "k", time.Second)
		unavailable(t, err)
	})
	t.Run("timeouts", func(t *testing.T) {
		servers := redistest.NewN(t, 3)
		v := newVia(t, servers, locking.WithMasterTimeout(100*time.Millisecond))
		// first contact, before the faults; on a busy host a master can
		// take longer than the 100ms master timeout to answer it: try again
		l, err := v.TryLock(ctx, "k", time.Second)
		for err != nil && ctx.Err() == nil {
			l, err = v.TryLock(ctx, "k", time.Second)
		}
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		for _, p := range v.proxies[:2] {
			if err := p.AddLatency(300*time.Millisecond, false); err != nil {
				t.Fatal(err)
			}
		}
		_, err = v.TryLock(ctx, "k", time.Second)
		unavailable(t, err)
	})
	t.Run("validity used up by slow masters", func(t *testing.T) {
		s := redistest.New(t)
		p := redistest.NewTestProxy(t, s.Addr())
		c := newClient(t, []*redis.Client{through(t, s, p)}, locking.WithMasterTimeout(2*time.Second))
		l, err := c.TryLock(ctx, "k", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		if err := p.AddLatency(150*time.Millisecond, false); err != nil {
			t.Fatal(err)
		}
		_, err = c.TryLock(ctx, "k", 100*time.Millisecond)
		unavailable(t, err)
	})
	t.Run("fence write-back on slow masters", func(t *testing.T) {
		servers := redistest.NewN(t, 3)
		v := newVia(t, servers, locking.WithMasterTimeout(2*time.Second))
		l, err := v.TryLock(ctx, "k", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
		// three different counters: the fence must be written back
		for i, r := range clientsOf(t, servers...) {
			if err := r.Set(ctx, "baton:lock:{k}:fence", 1e15+int64(i)*1000, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		// B's and C's answers arrive after their 50ms keys expired there
		for _, p := range v.proxies[1:] {
			if err := p.AddLatency(150*time.Millisecond, false); err != nil {
				t.Fatal(err)
			}
		}
		_, err = v.TryLock(ctx, "k", 50*time.Millisecond)
		unavailable(t, err)
		var oe *locking.ObtainError
		if !errors.As(err, &oe) || oe.Fence == nil {
			t.Fatalf("err = %v, want a fence write-back failure", err)
		}
	})
}

// Inputs the library refuses itself, before contacting Redis.
func TestQuarantineInputs(t *testing.T) {
	s := redistest.New(t)
	ms := []redis.UniversalClient{s.TestClient(t)}
	for _, q := range []time.Duration{0, -time.Second} {
		if _, err := locking.NewQuorum(ms, locking.WithRestartQuarantine(q)); !errors.Is(err, locking.ErrInvalid) {
			t.Fatalf("quarantine %v: New = %v, want ErrInvalid", q, err)
		}
	}
	c, err := locking.NewQuorum(ms, locking.WithRestartQuarantine(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.TryLock(testCtx(t), "k", 2*time.Second); !errors.Is(err, locking.ErrInvalid) || !strings.Contains(err.Error(), "quarantine") {
		t.Fatalf("ttl above the quarantine: TryLock = %v, want ErrInvalid", err)
	}
}

// infoLog records warnings and one-time reports, formatted.
// Each master's persistence is read and reported once, at first contact.
func TestPersistenceReported(t *testing.T) {
	s := redistest.New(t, redistest.WithArgs("--save", "900 1", "--appendonly", "yes", "--appendfsync", "everysec"))
	var log logBuf
	c := newClient(t, clientsOf(t, s), locking.WithLogger(log.logger()))
	ctx := testCtx(t)
	for range 3 {
		l, err := c.TryLock(ctx, "k", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
	}
	out := log.String()
	if n := strings.Count(out, "appendfsync everysec"); n != 1 {
		t.Fatalf("persistence reported %d times, want once:\n%s", n, out)
	}
}

// Quorum counters expire: dynamic lock names do not grow Redis for ever.
func TestQuorumCountersExpire(t *testing.T) {
	servers := redistest.NewN(t, 3)
	c := newClient(t, clientsOf(t, servers...))
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "dyn", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	for i, r := range clientsOf(t, servers...) {
		ttl, err := r.PTTL(ctx, "baton:lock:{dyn}:fence").Result()
		if err != nil || ttl <= 0 {
			t.Fatalf("master %d: counter ttl %v, %v; want an expiry", i, ttl, err)
		}
	}
}

// heldEverywhere waits until key exists on every server. TryLock returns once
// a quorum granted: the last master's grant may still be on its way, and a
// test that deletes the key on a majority before it lands would see that
// grant make a majority again.
func heldEverywhere(t *testing.T, ctx context.Context, servers []*redistest.Server, key string) {
	t.Helper()
	for _, s := range servers {
		rdb := s.TestClient(t)
		poll.Require(t, 30*time.Second, s.Addr()+" to grant "+key, func() bool {
			n, err := rdb.Exists(ctx, key).Result()
			return err == nil && n == 1
		})
	}
}
