package locking_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// via is a client whose connection to each master goes through its own
// proxy, so a test can cut one client off one master.
type via struct {
	*locking.Client
	proxies []*redistest.Proxy
}

func newVia(t *testing.T, servers []*redistest.Server, opts ...locking.Option) via {
	t.Helper()
	rdbs, ps := proxied(t, servers)
	return via{newClient(t, rdbs, opts...), ps}
}

// strictVia is newVia without the fresh-deployment opt-in, with restart
// quarantine q.
func strictVia(t *testing.T, servers []*redistest.Server, q time.Duration, opts ...locking.Option) via {
	t.Helper()
	rdbs, ps := proxied(t, servers)
	return via{strict(t, rdbs, q, opts...), ps}
}

func proxied(t *testing.T, servers []*redistest.Server) ([]*redis.Client, []*redistest.Proxy) {
	var rdbs []*redis.Client
	var ps []*redistest.Proxy
	for _, s := range servers {
		p := redistest.NewTestProxy(t, s.Addr())
		ps = append(ps, p)
		rdbs = append(rdbs, through(t, s, p))
	}
	return rdbs, ps
}

func cut(t *testing.T, p *redistest.Proxy) {
	t.Helper()
	if err := p.Cut(); err != nil {
		t.Fatal(err)
	}
}

func restore(t *testing.T, p *redistest.Proxy) {
	t.Helper()
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
}

func TestQuorumSurvivesMinorityLoss(t *testing.T) {
	for _, tc := range []struct{ n, kill int }{{3, 1}, {5, 1}, {5, 2}} {
		t.Run(fmt.Sprintf("%d masters %d killed", tc.n, tc.kill), func(t *testing.T) {
			servers := redistest.NewN(t, tc.n)
			a := newClient(t, clientsOf(t, servers...))
			b := newClient(t, clientsOf(t, servers...))
			ctx := testCtx(t)
			// deployed with every master up (a brand-new set is fresh only
			// if every master answers)
			if err := a.Prepare(ctx); err != nil {
				t.Fatal(err)
			}
			for _, s := range servers[:tc.kill] {
				if err := s.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			l, err := a.TryLock(ctx, "q", time.Second)
			if err != nil {
				t.Fatalf("TryLock with %d of %d masters down = %v", tc.kill, tc.n, err)
			}
			if _, err := b.TryLock(ctx, "q", time.Second); !errors.Is(err, locking.ErrNotObtained) {
				t.Fatalf("second holder: %v, want ErrNotObtained", err)
			}
			prev := l.Fence()
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			l, err = b.Lock(ctx, "q", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l.Fence() <= prev {
				t.Fatalf("fence %d not above %d", l.Fence(), prev)
			}
			_ = l.Release(ctx)
		})
	}
}

func TestQuorumMajorityLostFailsCleanly(t *testing.T) {
	for _, tc := range []struct{ n, kill int }{{3, 2}, {5, 3}} {
		t.Run(fmt.Sprintf("%d masters %d killed", tc.n, tc.kill), func(t *testing.T) {
			servers := redistest.NewN(t, tc.n)
			a := newClient(t, clientsOf(t, servers...))
			ctx := testCtx(t)
			held, err := a.Lock(ctx, "m", 600*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range servers[:tc.kill] {
				if err := s.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			b := newClient(t, clientsOf(t, servers...))
			_, err = b.TryLock(ctx, "m", time.Second)
			var oe *locking.ObtainError
			if !errors.As(err, &oe) || !errors.Is(err, locking.ErrUnavailable) || len(oe.Failures) != tc.n {
				t.Fatalf("TryLock with a majority down = %v, want an ObtainError with every master's reason", err)
			}
			if oe.Granted != 0 {
				t.Fatalf("granted by %d masters while another holds it", oe.Granted)
			}
			// the holder cannot extend below quorum: its lease ends, no later
			// than its validity deadline
			waitDone(t, held, 5*time.Second)
			if !errors.Is(held.Err(), locking.ErrLost) {
				t.Fatalf("holder's lease = %v, want ErrLost", held.Err())
			}
			// and nothing was left behind on the surviving masters by b
			for _, s := range servers[tc.kill:] {
				v, _ := s.TestClient(t).Get(ctx, "baton:lock:{m}").Result()
				if v != "" && v != held.Token() {
					t.Fatalf("master %s holds %q after a failed acquire", s.Addr(), v)
				}
			}
		})
	}
}

// DESIGN counterexample (a): H1 takes {A,B} and gets fence F; A restarts
// empty; H2 reaches only {A,C}. Reading or incrementing counters would issue F
// again. A restarted master must stay out until repaired, and once repaired
// the fence must be above F.
func TestFencingMasterRestartedEmpty(t *testing.T) {
	servers := redistest.NewN(t, 3)
	deploy(t, servers...)
	h1 := strictVia(t, servers, 2*time.Second)
	h2 := strictVia(t, servers, 2*time.Second)
	ctx := testCtx(t)

	l, err := h1.Lock(ctx, "inv", time.Second) // all three: counters agree
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)

	cut(t, h1.proxies[2]) // H1 sees {A,B}
	l, err = h1.TryLock(ctx, "inv", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f1 := l.Fence()
	_ = l.Release(ctx)
	restore(t, h1.proxies[2])

	if err := servers[0].Restart(); err != nil { // A forgets everything
		t.Fatal(err)
	}
	cut(t, h2.proxies[1]) // H2 sees {A,C}
	_, err = h2.TryLock(ctx, "inv", time.Second)
	if err == nil {
		t.Fatal("H2 acquired through a restarted, unrepaired master")
	}
	if !errors.Is(err, locking.ErrUnavailable) {
		t.Fatalf("H2 TryLock = %v", err)
	}
	t.Logf("kept out: %v", err)

	// A was repaired on H2's first contact; it waits out its quarantine, and
	// meanwhile B and C grant the lock above every earlier fence
	restore(t, h2.proxies[1])
	l2, err := h2.Lock(ctx, "inv", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= f1 {
		t.Fatalf("fence %d issued after %d: repeats or goes back", l2.Fence(), f1)
	}
	_ = l2.Release(ctx)

	// A carries a marker again (the repair ran on first contact)
	rawA := servers[0].TestClient(t)
	poll.Require(t, 30*time.Second, "A repaired", func() bool {
		if n, _ := rawA.Exists(ctx, "baton:lock:marker").Result(); n != 0 {
			return true
		}
		// contact triggers the repair, which runs in the background: keep
		// going until A carries the marker, not merely until a lock succeeds
		if l, err := h2.TryLock(ctx, "other", time.Second); err == nil {
			_ = l.Release(ctx)
		}
		return false
	})
	// repaired A now votes: {A,C} alone grant the lock, above every earlier fence
	cut(t, h2.proxies[1])
	var l3 *locking.Lease
	for l3 == nil {
		l3, err = h2.TryLock(ctx, "inv", time.Second)
		if err != nil && ctx.Err() != nil {
			t.Fatalf("A never voted again after repair: %v", err)
		}
		if err != nil {
			time.Sleep(20 * time.Millisecond) // real time: A's quarantine runs on Redis's clock
		}
	}
	if l3.Fence() <= l2.Fence() {
		t.Fatalf("fence %d after %d", l3.Fence(), l2.Fence())
	}
	_ = l3.Release(ctx)
}

// DESIGN counterexample (b): H1 reads the counters, stalls past the ttl, H2
// acquires, H1 resumes. Here H1's answers arrive late (added latency on every
// reply): its acquisition must fail for lack of validity, H2 takes the lock
// once H1's keys expire, and fences never repeat.
func TestFencingPausedAcquirer(t *testing.T) {
	servers := redistest.NewN(t, 3)
	h1 := newVia(t, servers, locking.WithMasterTimeout(time.Second))
	h2 := newClient(t, clientsOf(t, servers...))
	ctx := testCtx(t)
	l0, err := h2.Lock(ctx, "p", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f0 := l0.Fence()
	_ = l0.Release(ctx)

	warm, err := h1.TryLock(ctx, "warm", time.Second) // connections and scripts in place
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Release(ctx)
	for _, p := range h1.proxies {
		if err := p.AddLatency(400*time.Millisecond, false); err != nil {
			t.Fatal(err)
		}
	}
	res := make(chan error, 1)
	go func() {
		l, err := h1.TryLock(ctx, "p", 300*time.Millisecond)
		if err == nil {
			err = fmt.Errorf("stalled acquirer got fence %d", l.Fence())
		}
		res <- err
	}()
	// H1's scripts ran (its replies are still on the way) before H2 tries
	raw := servers[0].TestClient(t)
	poll.Require(t, 30*time.Second, "H1's key on a master", func() bool {
		n, err := raw.Exists(ctx, "baton:lock:{p}").Result()
		return err == nil && n > 0
	})
	l2, err := h2.Lock(ctx, "p", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	err = <-res
	// it ran out of validity, or found H2 holding the key when it came to
	// confirm its fence: either way, not obtained
	var oe *locking.ObtainError
	if !errors.As(err, &oe) || (!oe.Expired && oe.Fence == nil) {
		t.Fatalf("stalled acquirer: %v, want not obtained for lack of validity", err)
	}
	if l2.Fence() <= f0 {
		t.Fatalf("fence %d after %d", l2.Fence(), f0)
	}
}

// A holder whose extensions stall (paused process, slow network) loses its
// lease at its deadline, before H2 can take over; its late extension reply
// does not revive it; fences order the two.
func TestFencingPausedHolderResumes(t *testing.T) {
	servers := redistest.NewN(t, 3)
	h1 := newVia(t, servers, locking.WithMasterTimeout(2*time.Second))
	h2 := newClient(t, clientsOf(t, servers...))
	ctx := testCtx(t)
	l1, err := h1.Lock(ctx, "r", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range h1.proxies {
		if err := p.AddLatency(600*time.Millisecond, true); err != nil {
			t.Fatal(err)
		}
	}
	l2, err := h2.Lock(ctx, "r", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	select {
	case <-l1.Done():
	default:
		t.Fatal("H2 acquired while H1's lease was live")
	}
	if !errors.Is(l1.Err(), locking.ErrLost) {
		t.Fatalf("H1 lease = %v", l1.Err())
	}
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("fence %d not above %d", l2.Fence(), l1.Fence())
	}
	// H1's delayed extension replies arrive (their extend scripts found H2's
	// token or no key): H1 stays ended and H2 keeps the key
	for _, p := range h1.proxies {
		restore(t, p)
	}
	if err := l1.Extend(ctx, time.Second); !errors.Is(err, locking.ErrNotHeld) {
		t.Fatalf("Extend of the ended lease = %v", err)
	}
	// H2 holds a quorum (a master where H1's key expired a moment later
	// than on the others may have said busy to H2 and be empty now); no
	// master went back to H1
	held := 0
	for _, s := range servers {
		switch v, _ := s.TestClient(t).Get(ctx, "baton:lock:{r}").Result(); v {
		case l2.Token():
			held++
		case l1.Token():
			t.Fatalf("master %s holds H1's token again", s.Addr())
		}
	}
	if held < h2.Quorum() {
		t.Fatalf("H2's token on %d masters, want a quorum of %d", held, h2.Quorum())
	}
}

// Fences increase strictly while the set of reachable masters keeps changing.
func TestFencingMonotonicAcrossQuorumChanges(t *testing.T) {
	servers := redistest.NewN(t, 5)
	clients := []via{newVia(t, servers), newVia(t, servers)}
	ctx := testCtx(t)
	// deployed with every master up: a master first met without a marker
	// after others have one counts as restarted (and waits out the quarantine)
	for _, c := range clients {
		if err := c.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var last int64
	for i := range 30 {
		c := clients[i%2]
		down := rng.Perm(5)[:rng.IntN(3)] // 0-2 of 5 masters unreachable
		for _, d := range down {
			cut(t, c.proxies[d])
		}
		// a master restored a moment ago may still be refused by go-redis's
		// dial circuit (it probes once a second): retry, bounded
		var l *locking.Lease
		var err error
		poll.Until(5*time.Second, func() bool {
			l, err = c.Lock(ctx, "mono", time.Second)
			return !errors.Is(err, locking.ErrUnavailable)
		})
		if err != nil {
			t.Fatalf("round %d (down %v): %v", i, down, err)
		}
		if l.Fence() <= last {
			t.Fatalf("round %d (down %v): fence %d not above %d", i, down, l.Fence(), last)
		}
		last = l.Fence()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for _, d := range down {
			restore(t, c.proxies[d])
		}
	}
}

func TestQuorumMutualExclusion(t *testing.T) {
	servers := redistest.NewN(t, 3)
	ctx := testCtx(t)
	var mu sync.Mutex
	holders := 0
	var wg sync.WaitGroup
	for range 6 {
		c := newClient(t, clientsOf(t, servers...))
		wg.Go(func() {
			for range 5 {
				err := c.Hold(ctx, "qm", time.Second, func(context.Context) error {
					mu.Lock()
					holders++
					n := holders
					mu.Unlock()
					if n != 1 {
						t.Error("two holders at once")
					}
					time.Sleep(time.Millisecond) // real time: a holder stays in a moment, so an overlapping holder would be seen
					mu.Lock()
					holders--
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// Concurrent quorum calls share pipelines per master (answers handed out by
// whoever sends the batch); after SCRIPT FLUSH every master answers NOSCRIPT
// to the batched calls too, which must be sent again and succeed.
func TestQuorumBatchedCallsAfterScriptFlush(t *testing.T) {
	servers := redistest.NewN(t, 3)
	rdbs := clientsOf(t, servers...)
	c := newClient(t, rdbs)
	ctx := testCtx(t)
	if err := c.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		for _, r := range rdbs {
			if err := r.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := fmt.Sprintf("flush-%d", g)
				for range 20 {
					l, err := c.TryLock(ctx, key, time.Second)
					if err != nil {
						t.Errorf("round %d: TryLock %s = %v", round, key, err)
						return
					}
					if err := l.Extend(ctx, time.Second); err != nil {
						t.Errorf("round %d: Extend %s = %v", round, key, err)
					}
					if err := l.Release(ctx); err != nil {
						t.Errorf("round %d: Release %s = %v", round, key, err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

// A corrupt fencing counter on one master of a quorum fails the acquisition
// when that master's answer is awaited, naming it and the key, whatever the
// others grant: its fence is unknown, so the largest over the masters is too.
func TestQuorumCorruptCounterOnOneMasterFails(t *testing.T) {
	servers := redistest.NewN(t, 3)
	c := newVia(t, servers)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "q", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Fence()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	key := "baton:lock:{q}:fence"
	a := servers[0].TestClient(t)
	if err := a.Set(ctx, key, "9223372036854775807", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// master 2 is cut off: the quorum needs master 0's answer
	cut(t, c.proxies[2])
	_, err = c.TryLock(ctx, "q", time.Second)
	wantCorrupt(t, err, c.proxies[0].Addr(), key) // the address the client dials
	if v, _ := servers[1].TestClient(t).Get(ctx, "baton:lock:{q}").Result(); v != "" {
		t.Fatalf("master 1 still holds the lock after the failed acquisition (%q)", v)
	}
	// repaired by deleting the counter: the next fence is above every
	// fence issued before
	restore(t, c.proxies[2])
	if err := a.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	l, err = c.Lock(ctx, "q", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	if l.Fence() <= first {
		t.Fatalf("fence after the repair = %d, not above %d", l.Fence(), first)
	}
}

func TestQuorumCorruptCountersOnAMajorityFail(t *testing.T) {
	servers := redistest.NewN(t, 3)
	c := newClient(t, clientsOf(t, servers...))
	ctx := testCtx(t)
	key := "baton:lock:{m}:fence"
	for _, s := range servers[:2] {
		if err := s.TestClient(t).Set(ctx, key, "1.5", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	_, err := c.Lock(ctx, "m", time.Second)
	var oe *locking.ObtainError
	if !errors.As(err, &oe) || !errors.Is(err, locking.ErrCorrupt) {
		t.Fatalf("Lock = %v, want an ObtainError wrapping ErrCorrupt", err)
	}
	named := 0
	for _, f := range oe.Failures {
		var ce *locking.CorruptError
		if errors.As(f, &ce) && ce.Key == key && ce.Addr == servers[f.Index].Addr() {
			named++
		}
	}
	if named != 2 {
		t.Fatalf("Lock = %v: want both corrupt masters named with the key", err)
	}
}

// A lock forgotten after its last use leaves no fencing counter on any
// master, only each master's one floor above what it deleted; taken again,
// its fences go on above every one before. A lease held through the forget
// stays held.
func TestForgetDeletesTheFenceCounter(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t))
	}
	c := newClient(t, rdbs)
	ctx := testCtx(t)
	const key, floorKey = "baton:lock:{gone}:fence", "baton:lock:marker:forgotten"
	l, err := c.Lock(ctx, "gone", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	last := l.Fence()
	// Lock returns once a majority granted: the last master's acquire may
	// land later (and, landing after the forget, seed its counter again)
	poll.Require(t, 10*time.Second, "the lock's acquire landed on every master", func() bool {
		for _, r := range rdbs {
			if n, err := r.Get(ctx, key).Int64(); err != nil || n < last {
				return false
			}
		}
		return true
	})
	if err := c.Forget(ctx, "gone", "never-taken"); err != nil {
		t.Fatal(err)
	}
	for i, r := range rdbs {
		if n := r.Exists(ctx, key).Val(); n != 0 {
			t.Fatalf("master %d: the forgotten lock's counter is still there", i)
		}
		if f, err := r.Get(ctx, floorKey).Int64(); err != nil || f <= last {
			t.Fatalf("master %d: forgotten floor %d (%v), want above the last fence %d", i, f, err, last)
		}
	}
	if err := l.Extend(ctx, 200*time.Millisecond); err != nil {
		t.Fatalf("the lease held through the forget: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = c.Lock(ctx, "gone", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= last {
		t.Fatalf("fence %d after the forget, not above %d", l.Fence(), last)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Forget(ctx, ""); !errors.Is(err, locking.ErrInvalid) {
		t.Fatalf("forget of an empty name: %v, want ErrInvalid", err)
	}
}

// A forgotten lock's counters are gone; a majority that takes it again
// seeds its fence anew, not from its own clocks alone. The masters' clocks
// may differ by seconds: a fence drawn from a clock ahead and written back
// to a majority must still be below the fence of the next holder, which a
// majority without that master grants.
func TestAFenceAfterForgetIsAboveTheLastOne(t *testing.T) {
	clk := redistest.NewTestClock(t)
	const ahead = 3 * time.Second // within the 24 h the docs allow
	if err := clk.Step(ahead); err != nil {
		t.Fatal(err)
	}
	servers := []*redistest.Server{redistest.New(t, redistest.WithClock(clk)), redistest.New(t), redistest.New(t)}
	const quarantine = 500 * time.Millisecond
	c := newVia(t, servers, locking.WithRestartQuarantine(quarantine))
	direct := clientsOf(t, servers...)
	ctx := testCtx(t)
	const key = "baton:lock:{gone}:fence"
	// a deployment that has run a while: its masters' fence floors, from
	// their marking, lie behind the clocks
	if err := c.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	marked := direct[0].Time(ctx).Val()
	poll.Require(t, 10*time.Second, "every master's clock passed the fence floor", func() bool {
		return direct[1].Time(ctx).Val().After(marked) && direct[2].Time(ctx).Val().After(marked)
	})

	// taken by the master ahead and another (the third answers late): the
	// fence is the clock ahead's, written back to a majority
	if err := c.proxies[2].AddLatency(100*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	l, err := c.Lock(ctx, "gone", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	last := l.Fence()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	restore(t, c.proxies[2])
	poll.Require(t, 10*time.Second, "the acquire landed on every master", func() bool {
		for _, r := range direct {
			if r.Exists(ctx, key).Val() == 0 {
				return false
			}
		}
		return true
	})
	if err := c.Forget(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 10*time.Second, "the forgotten counters ended on every master", func() bool {
		for _, r := range direct {
			if r.Exists(ctx, key).Val() != 0 {
				return false
			}
		}
		return true
	})
	// a majority without the master ahead takes it again
	cut(t, c.proxies[0])
	l, err = c.Lock(ctx, "gone", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctx) }()
	if l.Fence() <= last {
		t.Fatalf("fence %d after the forgotten counters ended, not above the last one %d (%v back; the masters' clocks differ by %v, their quarantine is %v)",
			l.Fence(), last, time.Duration(last-l.Fence())*time.Microsecond, ahead, quarantine)
	}
}

// A fence written back to a master after a forget deleted its counter
// there plants that fence below the master's forgotten floor, and a
// counter that is there is never compared with the floor: the next
// majority through that master counts on from the stale fence. Here the
// first holder's acquire reaches one master (X) late, after the second
// holder's fence went over it; the forget lands between that acquire and
// its fence write-back, and a majority without the master whose clock
// drew the fences (Y) grants a fence already issued.
func TestAFenceWrittenBackAfterForgetKeepsTheNextOneAbove(t *testing.T) {
	clk := redistest.NewTestClock(t)
	// X, Y (its clock is stepped ahead once the set is marked), Z
	servers := []*redistest.Server{redistest.New(t), redistest.New(t, redistest.WithClock(clk)), redistest.New(t)}
	const x, y, z = 0, 1, 2
	long := locking.WithMasterTimeout(20 * time.Second)
	c1, c2 := newVia(t, servers, long), newVia(t, servers, long)
	direct := clientsOf(t, servers...)
	ctx := testCtx(t)
	const name, lockKey, key = "gone", "baton:lock:{gone}", "baton:lock:{gone}:fence"
	once := locking.WithAutoExtend(false)
	for _, c := range []via{c1, c2} {
		if err := c.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		l, err := c.Lock(ctx, "warm-up", time.Second, once)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := clk.Step(time.Minute); err != nil { // within the 24 h the docs allow
		t.Fatal(err)
	}

	// the first holder's calls to X arrive late: its acquire there lands
	// after the second holder's fence, its fence write-back later still
	const late = 2 * time.Second
	if err := c1.proxies[x].AddLatency(late, true); err != nil {
		t.Fatal(err)
	}
	h1, err := c1.Lock(ctx, name, 20*time.Second, once)
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() { released <- h1.Release(context.WithoutCancel(ctx)) }()
	poll.Require(t, 10*time.Second, "the first holder released Y and Z", func() bool {
		return direct[y].Exists(ctx, lockKey).Val() == 0 && direct[z].Exists(ctx, lockKey).Val() == 0
	})
	cut(t, c2.proxies[z])
	h2, err := c2.TryLock(ctx, name, 20*time.Second, once)
	if err != nil {
		t.Fatal(err)
	}
	last := h2.Fence()
	if last <= h1.Fence() {
		t.Fatalf("second fence %d not above the first %d", last, h1.Fence())
	}
	if err := h2.Release(ctx); err != nil {
		t.Logf("release (Z cut off): %v", err)
	}
	restore(t, c2.proxies[z])

	// the name is gone: forgotten while the first holder's acquire holds X
	// and its write-back is on the way
	poll.Require(t, 10*time.Second, "the first holder's acquire landed on X", func() bool {
		return direct[x].Get(ctx, lockKey).Val() == h1.Token()
	})
	if err := c2.Forget(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Logf("first holder's release: %v", err)
	}
	restore(t, c1.proxies[x])
	if n, err := direct[x].Get(ctx, key).Int64(); err == nil {
		t.Logf("X's counter after the forget: %d (forgotten floor %s)", n, direct[x].Get(ctx, "baton:lock:marker:forgotten").Val())
	}

	// a majority without Y takes it again
	cut(t, c2.proxies[y])
	h3, err := c2.TryLock(ctx, name, 20*time.Second, once)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h3.Release(ctx) }()
	if h3.Fence() <= last {
		t.Fatalf("fence %d after the forget, not above the last one %d: a fence written back to X after the forget lowered its counter below its forgotten floor", h3.Fence(), last)
	}
}
