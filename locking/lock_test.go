package locking_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

func TestBadInputTouchesNoRedis(t *testing.T) {
	if _, err := locking.NewQuorum(nil); !errors.Is(err, locking.ErrInvalid) || !strings.Contains(err.Error(), "no masters") {
		t.Fatalf("NewQuorum(nil) = %v, want ErrInvalid saying no masters", err)
	}
	if _, err := locking.New(nil); !errors.Is(err, locking.ErrInvalid) || !strings.Contains(err.Error(), "nil client") {
		t.Fatalf("New(nil) = %v, want ErrInvalid naming the nil client", err)
	}
	some := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer some.Close()
	if _, err := locking.NewQuorum([]redis.UniversalClient{some, nil, nil}); !errors.Is(err, locking.ErrInvalid) || !strings.Contains(err.Error(), "master 1") {
		t.Fatalf("NewQuorum with a nil client = %v, want ErrInvalid naming master 1", err)
	}
	// a client pointing nowhere: any Redis contact would fail differently
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	c, err := locking.New(dead)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t)
	for _, tc := range []struct {
		key string
		ttl time.Duration
	}{
		{"", time.Second},
		{"k", 0},
		{"k", -time.Second},
		{"k", 5 * time.Millisecond},
		{"k", 1500 * time.Microsecond},
	} {
		if _, err := c.TryLock(ctx, tc.key, tc.ttl); !errors.Is(err, locking.ErrInvalid) {
			t.Errorf("TryLock(%q, %v) = %v, want ErrInvalid", tc.key, tc.ttl, err)
		}
		if _, err := c.Lock(ctx, tc.key, tc.ttl); !errors.Is(err, locking.ErrInvalid) {
			t.Errorf("Lock(%q, %v) = %v, want ErrInvalid", tc.key, tc.ttl, err)
		}
	}
	three, _ := locking.NewQuorum([]redis.UniversalClient{dead, dead, dead})
	defer three.Close()
	if _, err := three.Lock(ctx, "k", time.Second, locking.WithFair()); !errors.Is(err, locking.ErrInvalid) {
		t.Errorf("fair on 3 masters = %v, want ErrInvalid", err)
	}
}

func TestRedisDownIsNotNotObtained(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	_, err := c.TryLock(testCtx(t), "k", time.Second)
	if !errors.Is(err, locking.ErrUnavailable) || errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("TryLock with Redis down = %v, want ErrUnavailable and not ErrNotObtained", err)
	}
	if !strings.Contains(err.Error(), s.Addr()) {
		t.Errorf("error %q does not name the master %s", err, s.Addr())
	}
	// Lock must not wait on an outage it cannot cure
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	if _, err := c.Lock(ctx, "k", time.Second); !errors.Is(err, locking.ErrUnavailable) || ctx.Err() != nil {
		t.Fatalf("Lock with Redis down = %v (ctx %v), want ErrUnavailable at once", err, ctx.Err())
	}
}

func TestTryLockContended(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Token()) < 22 { // 128 bits in base64
		t.Errorf("token %q shorter than 128 bits", l.Token())
	}
	_, err = c.TryLock(ctx, "k", time.Second)
	var oe *locking.ObtainError
	if !errors.Is(err, locking.ErrNotObtained) || errors.Is(err, locking.ErrUnavailable) || !errors.As(err, &oe) || oe.Granted != 0 {
		t.Fatalf("second TryLock = %v, want ErrNotObtained only", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l.Err() != locking.ErrReleased {
		t.Errorf("Err after Release = %v", l.Err())
	}
	if err := l.Release(ctx); !errors.Is(err, locking.ErrNotHeld) {
		t.Errorf("second Release = %v, want ErrNotHeld", err)
	}
	l2, err := c.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Fence() <= l.Fence() {
		t.Errorf("fence %d after %d: not increasing", l2.Fence(), l.Fence())
	}
	_ = l2.Release(ctx)
}

// TestMutualExclusion: 50 goroutines increment a shared counter with a
// non-atomic read-modify-write under the lock; any overlap loses updates.
func TestMutualExclusion(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	var counter, inside atomic.Int64
	const workers, rounds = 50, 10
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				err := c.Hold(ctx, "counter", time.Second, func(context.Context) error {
					if inside.Add(1) != 1 {
						t.Error("two holders at once")
					}
					v := counter.Load()
					time.Sleep(100 * time.Microsecond) // real time: widen the race window: a second holder inside would lose an increment
					counter.Store(v + 1)
					inside.Add(-1)
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := counter.Load(); got != workers*rounds {
		t.Fatalf("counter = %d, want %d: updates were lost", got, workers*rounds)
	}
}

// Seed problem 1: a process took too long, the lock expired, and it does not
// know; it might even release the lock someone else holds now.
func TestSeedLostLockKnownToHolder(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "slow", 200*time.Millisecond, locking.WithAutoExtend(false))
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, l, 2*time.Second)
	if !errors.Is(l.Err(), locking.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", l.Err())
	}
	if !errors.Is(l.Context().Err(), context.Canceled) || !errors.Is(context.Cause(l.Context()), locking.ErrLost) {
		t.Fatalf("context not cancelled with the loss: %v / %v", l.Context().Err(), context.Cause(l.Context()))
	}
	other, err := c.Lock(ctx, "slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release(ctx)
	if err := l.Release(ctx); !errors.Is(err, locking.ErrNotHeld) || !errors.Is(err, locking.ErrLost) {
		t.Fatalf("Release of a lost lease = %v, want ErrNotHeld wrapping ErrLost", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, locking.ErrNotHeld) {
		t.Fatalf("Extend of a lost lease = %v, want ErrNotHeld", err)
	}
	if other.Err() != nil {
		t.Fatalf("the new holder's lease ended: %v", other.Err())
	}
	if v, _ := s.TestClient(t).Get(ctx, "baton:lock:{slow}").Result(); v != other.Token() {
		t.Fatalf("key holds %q, want the new holder's token", v)
	}
}

// Seed problem 2: a holder crashed; others must not wait forever, and must
// not poll blindly: they re-check when the crashed holder's ttl runs out.
func TestSeedCrashedHolder(t *testing.T) {
	s := redistest.New(t)
	crashed := newClient(t, clientsOf(t, s))
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	if _, err := crashed.Lock(ctx, "job", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	crashed.Close() // stops extending: as good as a crash for Redis
	start := time.Now()
	l, err := c.Lock(ctx, "job", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("took %v to take over a crashed holder's 300ms lock", waited)
	}
}

// Seed problem 3: a lock timed out and several processes try to take it at
// once; exactly one may win.
func TestSeedConcurrentAcquireAfterTimeout(t *testing.T) {
	s := redistest.New(t)
	ctx := testCtx(t)
	for round := range 5 {
		first := newClient(t, clientsOf(t, s))
		// a 100ms lease is refused when its reply comes after its validity
		// (a slow machine): that is TryLock's rule, so try again
		l, err := first.TryLock(ctx, "expiring", 100*time.Millisecond, locking.WithAutoExtend(false))
		for oe := (*locking.ObtainError)(nil); errors.As(err, &oe) && oe.Expired; {
			l, err = first.TryLock(ctx, "expiring", 100*time.Millisecond, locking.WithAutoExtend(false))
		}
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var wins atomic.Int64
		var leases sync.Map
		for i := range 10 {
			c := newClient(t, clientsOf(t, s))
			wg.Go(func() {
				<-l.Done() // all rush in when it expires
				l2, err := c.TryLock(ctx, "expiring", time.Second)
				for errors.Is(err, locking.ErrNotObtained) && wins.Load() == 0 {
					l2, err = c.TryLock(ctx, "expiring", time.Second)
				}
				if err == nil {
					wins.Add(1)
					leases.Store(i, l2)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d winners after the timeout, want 1", round, wins.Load())
		}
		leases.Range(func(_, v any) bool { _ = v.(*locking.Lease).Release(ctx); return true })
	}
}

// Seed problem 4: 1 and 3 together: the old holder keeps working after its
// lease ran out while a new holder works too. The old holder's context is
// cancelled before the new one can acquire, and the fences order them.
func TestSeedSeveralBelieveTheyHoldIt(t *testing.T) {
	s := redistest.New(t)
	old := newClient(t, clientsOf(t, s))
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l1, err := old.TryLock(ctx, "res", 200*time.Millisecond, locking.WithAutoExtend(false)) // it stops extending: frozen
	if err != nil {
		t.Fatal(err)
	}
	var oldEnded atomic.Bool
	go func() { <-l1.Done(); oldEnded.Store(true) }()
	l2, err := c.Lock(ctx, "res", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	select {
	case <-l1.Done():
	default:
		t.Fatal("new holder acquired while the old lease was still live")
	}
	if l2.Fence() <= l1.Fence() {
		t.Fatalf("fence %d of the new holder not above %d", l2.Fence(), l1.Fence())
	}
}

func TestAutoExtensionKeepsLockPastSeveralTTLs(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	other := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l, err := c.Lock(ctx, "long", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Deadline()
	// wait, without sleeping, until the deadline has moved 5 ttls on
	for l.Deadline().Before(first.Add(750 * time.Millisecond)) {
		if _, err := other.TryLock(ctx, "long", time.Second); !errors.Is(err, locking.ErrNotObtained) {
			t.Fatalf("other TryLock while held = %v", err)
		}
		select {
		case <-l.Done():
			t.Fatalf("lease ended: %v", l.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TryLock's and Lock's leases behave alike: both are auto-extended by
// default and keep the lock past several ttls; WithAutoExtend(false) makes
// either end at its validity deadline.
func TestTryLockLeaseAutoExtendsLikeLock(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	other := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	if err := c.Prepare(ctx); err != nil { // first contact done: extensions are round trips only
		t.Fatal(err)
	}
	const ttl = 400 * time.Millisecond
	for _, tc := range []struct {
		name string
		take func(key string, opts ...locking.LockOption) (*locking.Lease, error)
	}{
		{"TryLock", func(key string, opts ...locking.LockOption) (*locking.Lease, error) {
			return c.TryLock(ctx, key, ttl, opts...)
		}},
		{"Lock", func(key string, opts ...locking.LockOption) (*locking.Lease, error) {
			return c.Lock(ctx, key, ttl, opts...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "alike-" + tc.name
			l, err := tc.take(key)
			if err != nil {
				t.Fatal(err)
			}
			first := l.Deadline()
			// wait, without sleeping, until the deadline has moved 3 ttls on
			for l.Deadline().Before(first.Add(3 * ttl)) {
				if _, err := other.TryLock(ctx, key, time.Second); !errors.Is(err, locking.ErrNotObtained) {
					t.Fatalf("other TryLock while held = %v", err)
				}
				select {
				case <-l.Done():
					t.Fatalf("lease ended after %v: %v", time.Since(first.Add(-ttl)), l.Err())
				case <-time.After(20 * time.Millisecond):
				}
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}

			off, err := tc.take(key+"-off", locking.WithAutoExtend(false))
			if err != nil {
				t.Fatal(err)
			}
			ended := waitDone(t, off, 10*ttl)
			if !errors.Is(off.Err(), locking.ErrLost) || ended.Before(off.Deadline()) {
				t.Fatalf("lease without auto-extension ended at %v (deadline %v): %v, want ErrLost at the deadline", ended, off.Deadline(), off.Err())
			}
		})
	}
}

func TestHoldCapsEndTheLease(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	// ttls long enough that a loaded machine still extends in time: the
	// caps, not a late extension, must end these leases
	err := c.Hold(ctx, "hung", 600*time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done() // hung work: ends only when the lease does
		return ctx.Err()
	}, locking.WithMaxExtensions(2))
	if !errors.Is(err, locking.ErrHoldLimit) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Hold = %v, want ErrHoldLimit joined with the fn error", err)
	}
	err = c.Hold(ctx, "hung", 600*time.Millisecond, func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}, locking.WithMaxHold(1200*time.Millisecond))
	if !errors.Is(err, locking.ErrHoldLimit) {
		t.Fatalf("Hold with max hold = %v, want ErrHoldLimit", err)
	}
}

func TestHoldReturnsFnErrorAndReleases(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	boom := errors.New("boom")
	if err := c.Hold(ctx, "h", time.Second, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Hold = %v, want boom", err)
	}
	if n, _ := s.TestClient(t).Exists(ctx, "baton:lock:{h}").Result(); n != 0 {
		t.Fatal("key still exists after Hold returned")
	}
	// ctx ending cancels fn's context
	hctx, cancel := context.WithCancel(ctx)
	err := c.Hold(hctx, "h", time.Second, func(fctx context.Context) error {
		cancel()
		<-fctx.Done()
		return fctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Hold after ctx cancel = %v", err)
	}
}

// G3: when the masters stop answering, the lease ends before the key expires
// in Redis, so nobody else can hold it while this holder still believes it does.
func TestLeaseEndsBeforeRedisExpiryWhenMasterPaused(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	// the margin covers the holder's own lateness: generous here because CI
	// machines are shared and -race slows timers down
	c := newClient(t, []*redis.Client{rdb}, locking.WithLateness(50*time.Millisecond))
	ctx := testCtx(t)
	// a lease whose slack (an extension every ttl/3) covers a busy host's
	// stalls: one that lapses before the pause is lost by the rule, and the
	// test is about the pause
	l, err := c.Lock(ctx, "p", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Redis's own absolute expiry, read after each confirmed extension: pause
	// right after one so we know the exact expiry Redis will apply.
	var expiry time.Time
	for {
		d := l.Deadline()
		for l.Deadline().Equal(d) {
			select {
			case <-time.After(2 * time.Millisecond):
			case <-l.Done():
				t.Fatalf("lease ended early: %v", l.Err())
			}
		}
		ms, err := rdb.PExpireTime(ctx, "baton:lock:{p}").Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
		expiry = time.UnixMilli(int64(ms / time.Millisecond))
		break
	}
	defer s.Resume()
	done := waitDone(t, l, 3*time.Second)
	if !errors.Is(l.Err(), locking.ErrLost) {
		t.Fatalf("Err = %v, want ErrLost", l.Err())
	}
	// the guarantee is the lease's validity: it ends (Err says so from then,
	// whenever the timer behind Done fires on a busy host) before Redis
	// expires the key
	if end := l.Deadline(); !end.Before(expiry) {
		t.Fatalf("lease valid until %v, not before Redis expiry %v", end, expiry)
	}
	t.Logf("lease valid until %v before the key's expiry in Redis; Done observed %v after it", expiry.Sub(l.Deadline()), done.Sub(l.Deadline()))
}

func TestScriptFlushMidTest(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	l, err := c.Lock(ctx, "f", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 300*time.Millisecond); err != nil {
		t.Fatalf("Extend after SCRIPT FLUSH = %v", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after SCRIPT FLUSH = %v", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	l, err = c.TryLock(ctx, "f", time.Second)
	if err != nil {
		t.Fatalf("TryLock after SCRIPT FLUSH = %v", err)
	}
	_ = l.Release(ctx)
}

func TestFencingSingleMasterSurvivesRestartEmpty(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	var last int64
	for i := range 6 {
		if i == 3 {
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		l, err := c.TryLock(ctx, "fence", time.Second)
		for err != nil && errors.Is(err, locking.ErrUnavailable) && i == 3 { // reconnecting
			l, err = c.TryLock(ctx, "fence", time.Second)
		}
		if err != nil {
			t.Fatal(err)
		}
		if l.Fence() <= last {
			t.Fatalf("acquisition %d: fence %d not above %d", i, l.Fence(), last)
		}
		last = l.Fence()
		_ = l.Release(ctx)
	}
}

type logBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// logger is a slog logger writing to l.
func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestEvictionPolicyWarnsOrRefuses(t *testing.T) {
	s := redistest.New(t, redistest.WithArgs("--maxmemory-policy", "allkeys-lru"))
	ctx := testCtx(t)
	var log logBuf
	warn := newClient(t, clientsOf(t, s), locking.WithLogger(log.logger()))
	l, err := warn.TryLock(ctx, "e", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "maxmemory-policy") {
		t.Errorf("no warning logged, got %q", log.String())
	}
	refuse := newClient(t, clientsOf(t, s), locking.WithRefuseEviction())
	if _, err := refuse.TryLock(ctx, "e", time.Second); !errors.Is(err, locking.ErrEviction) || !strings.Contains(err.Error(), "allkeys-lru") {
		t.Fatalf("TryLock on an evicting master = %v, want ErrEviction naming the policy", err)
	}
}

func TestCloseEndsLeasesAndWaiters(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l, err := c.Lock(ctx, "c", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.Lock(ctx, "c", time.Second); errc <- err }()
	registered(t, s.TestClient(t), "c", 1)
	c.Close()
	if err := <-errc; !errors.Is(err, locking.ErrClosed) {
		t.Fatalf("waiter after Close = %v, want ErrClosed", err)
	}
	waitDone(t, l, time.Second)
	if !errors.Is(l.Err(), locking.ErrClosed) {
		t.Fatalf("lease after Close = %v, want ErrClosed", l.Err())
	}
	if _, err := c.TryLock(ctx, "c", time.Second); !errors.Is(err, locking.ErrClosed) {
		t.Fatalf("TryLock after Close = %v", err)
	}
}

// Close while calls are in flight: no panic, the calls end (a call started
// after Close fails with ErrClosed), and nothing keeps running (goleak).
func TestCloseWhileCallsRun(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d masters", n), func(t *testing.T) {
			servers := redistest.NewN(t, n)
			c := newClient(t, clientsOf(t, servers...))
			ctx := testCtx(t)
			var wg sync.WaitGroup
			started := make(chan struct{}, 16)
			for g := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 1_000_000; i++ { // bounded; Close ends it long before
						key := fmt.Sprintf("close-%d-%d", g, i%4)
						var l *locking.Lease
						var err error
						if i%2 == 0 {
							l, err = c.TryLock(ctx, key, time.Second)
						} else {
							l, err = c.Lock(ctx, key, time.Second) // auto-extended
						}
						if i == 0 {
							started <- struct{}{}
						}
						if errors.Is(err, locking.ErrClosed) {
							return
						}
						if l != nil {
							_ = l.Release(ctx)
						}
						if ctx.Err() != nil {
							t.Error("calls kept going after Close")
							return
						}
					}
					t.Error("a million calls and no ErrClosed")
				}()
			}
			for range 16 {
				<-started
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if _, err := c.TryLock(ctx, "after", time.Second); !errors.Is(err, locking.ErrClosed) {
				t.Fatalf("TryLock after Close = %v, want ErrClosed", err)
			}
		})
	}
}

// corruptCounters are fencing counter values no fence may come from, each
// with why: Lua numbers are doubles, so 2^63-1 would come back as a negative
// fence, and from 2^53 on the next fence would equal the last.
var corruptCounters = []struct{ name, value string }{
	{"2^63-1", "9223372036854775807"},
	{"2^53", "9007199254740992"},
	{"2^53-1, no fence above it", "9007199254740991"},
	{"text", "abc"},
	{"fraction", "1.5"},
	{"negative", "-5"},
	{"leading zero", "07"},
	{"terminal escape", "1\x1b[2K"},
}

// wantCorrupt fails the test unless err wraps ErrCorrupt with a
// *CorruptError naming key on the master at addr.
func wantCorrupt(t *testing.T, err error, addr, key string) {
	t.Helper()
	var ce *locking.CorruptError
	if !errors.Is(err, locking.ErrCorrupt) || !errors.As(err, &ce) {
		t.Fatalf("err = %v, want locking.ErrCorrupt with a *CorruptError", err)
	}
	if ce.Key != key || ce.Addr != addr {
		t.Fatalf("CorruptError names key %q on %s, want %q on %s", ce.Key, ce.Addr, key, addr)
	}
	if errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("err = %v: a corrupt counter is not a held lock", err)
	}
	if !strings.Contains(err.Error(), strconv.Quote(key)) {
		t.Fatalf("err = %q does not name the key %q", err, key)
	}
}

func TestCorruptFenceCounterFailsAcquisition(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	for _, tc := range corruptCounters {
		t.Run(tc.name, func(t *testing.T) {
			name := "corrupt-" + tc.name
			mu, err := c.RWMutex(name)
			if err != nil {
				t.Fatal(err)
			}
			sem, err := c.FairSemaphore(name, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []struct {
				kind, lock string
				take       func(context.Context) (*locking.Lease, error)
			}{
				{"TryLock", name, func(ctx context.Context) (*locking.Lease, error) { return c.TryLock(ctx, name, time.Second) }},
				{"Lock", name, func(ctx context.Context) (*locking.Lease, error) { return c.Lock(ctx, name, time.Second) }},
				{"fair Lock", name, func(ctx context.Context) (*locking.Lease, error) {
					return c.Lock(ctx, name, time.Second, locking.WithFair())
				}},
				{"RLock", "rw:" + name, func(ctx context.Context) (*locking.Lease, error) { return mu.RLock(ctx, time.Second) }},
				{"RWMutex.Lock", "rw:" + name, func(ctx context.Context) (*locking.Lease, error) { return mu.Lock(ctx, time.Second) }},
				{"FairSemaphore", "fsem:" + name, func(ctx context.Context) (*locking.Lease, error) { return sem.Acquire(ctx, time.Second) }},
			} {
				lockKey := "baton:lock:{" + k.lock + "}"
				key := lockKey + ":fence"
				if err := rdb.Set(ctx, key, tc.value, 0).Err(); err != nil {
					t.Fatal(err)
				}
				// Lock does not wait on it: waiting cures nothing
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				l, err := k.take(wctx)
				waited := wctx.Err()
				cancel()
				if l != nil {
					t.Fatalf("%s on counter %q: granted fence %d", k.kind, tc.value, l.Fence())
				}
				if waited != nil {
					t.Fatalf("%s on counter %q waited until its context ended: %v", k.kind, tc.value, err)
				}
				wantCorrupt(t, err, s.Addr(), key)
				if errors.Is(err, locking.ErrUnavailable) {
					t.Fatalf("%s on counter %q = %v: the master answered, it is not unavailable", k.kind, tc.value, err)
				}
				// nothing was written: the lock is free, the counter as it was
				if n, _ := rdb.Exists(ctx, lockKey, lockKey+":r").Result(); n != 0 {
					t.Fatalf("%s on counter %q left the lock taken", k.kind, tc.value)
				}
				if v, _ := rdb.Get(ctx, key).Result(); v != tc.value {
					t.Fatalf("%s changed counter %q to %q", k.kind, tc.value, v)
				}
			}
		})
	}
}

func TestLargestFenceCounterIssuesOneLastFence(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	key := "baton:lock:{last}:fence"
	if err := rdb.Set(ctx, key, "9007199254740990", 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(ctx, "last", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() != 1<<53-1 {
		t.Fatalf("fence = %d, want 2^53-1", l.Fence())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// the next one would not be exact: refused, never a fence that goes back
	_, err = c.TryLock(ctx, "last", time.Second)
	wantCorrupt(t, err, s.Addr(), key)
}

// An uncontended TryLock and Release on one master are two script calls
// and seven commands inside them: the acquire reads the clock, the
// master's marker and the fencing counter (one MGET), takes the key and
// moves the counter; the release checks the token and the waiters and
// deletes the key.
func TestUncontendedPairOnOneMasterRunsNineCommands(t *testing.T) {
	rdb, c := oneMaster(t)
	ctx := testCtx(t)
	pair := func() {
		t.Helper()
		l, err := c.TryLock(ctx, "pair", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair() // loads the scripts, marks the master, seeds the counter
	calls := func() int {
		n := 0
		for name, v := range redistest.CommandCalls(t, rdb) {
			if name != "info" {
				n += v
			}
		}
		return n
	}
	before := calls()
	const pairs = 10
	for range pairs {
		pair()
	}
	if got := calls() - before; got != 9*pairs {
		t.Errorf("%d pairs ran %d commands (%.1f a pair), want 9 a pair: %v", pairs, got, float64(got)/pairs, redistest.CommandCalls(t, rdb))
	}
}

// On one master, a restart marker that is a key of another type (the
// acquire reads it with the fencing counter in one MGET, which reads such
// a key as missing) fails the acquisition with an error naming the marker,
// rather than as a master that restarted and waits for a repair.
func TestMarkerOfAnotherTypeFailsAcquisition(t *testing.T) {
	rdb, c := oneMaster(t)
	ctx := testCtx(t)
	l, err := c.TryLock(ctx, "m", time.Second) // marks the master
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, "*marker*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("marker keys %v (%v), want one", keys, err)
	}
	marker := keys[0]
	if err := rdb.Del(ctx, marker).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, marker, "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	_, err = c.TryLock(ctx, "m", time.Second)
	var ce *locking.CorruptError
	if !errors.As(err, &ce) || ce.Key != marker {
		t.Fatalf("TryLock over a marker of another type: %v, want a corrupt error naming %s", err, marker)
	}
	if typ := rdb.Type(ctx, marker).Val(); typ != "hash" {
		t.Errorf("the marker is now a %s, want left as it was", typ)
	}
}

// oneMaster is a locking client over one new master (a fresh deployment),
// closed at cleanup, and a client of that master.
func oneMaster(t *testing.T) (*redis.Client, *locking.Client) {
	t.Helper()
	rdb := redistest.New(t).TestClient(t)
	c, err := locking.New(rdb, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return rdb, c
}
