package locking_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/histcheck"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// Fault schedules: each runs a recording lock workload (histcheck.LockLoad:
// holders write to a fencing store while they believe they hold the lock)
// while faults run, then checks the history: no two believed-held intervals
// of a key overlap, fences follow acquisition order, no stale write was
// accepted; and porcupine checks it against a fenced mutex
// (porcupine_test.go). A schedule also requires that the load made
// progress.

// checked runs load for d on clients while faults runs, then checks.
func checked(t *testing.T, d time.Duration, clients []*locking.Client, ttl time.Duration, faults func(ctx context.Context)) histcheck.Counts {
	t.Helper()
	h := histcheck.New()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	if faults != nil {
		wg.Go(func() { faults(ctx) })
	}
	taken := histcheck.LockLoad{Clients: clients, Keys: []string{"ledger", "stock"}, Goroutines: 8,
		TTL: ttl, Hold: 2 * ttl, Wait: 2 * ttl, Seed: 7}.Run(ctx, h)
	wg.Wait()
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	linearizable(t, mutexModel, h)
	c := h.Counts()
	if taken < 3 || c.Writes == c.Refused {
		t.Fatalf("no progress under the faults: %d leases, counts %+v", taken, c)
	}
	t.Logf("%d leases, %d writes (%d refused as stale)", c.Leases, c.Writes, c.Refused)
	return c
}

// faultyClients returns two clients over n new servers whose every
// connection goes through a fault proxy, one per server.
func faultyClients(t *testing.T, n int) ([]*redistest.Proxy, []*locking.Client) {
	servers := redistest.NewN(t, n)
	rdbs, ps := proxied(t, servers)
	second := make([]*redis.Client, n)
	for i, s := range servers {
		second[i] = through(t, s, ps[i])
	}
	opt := locking.WithMasterTimeout(100 * time.Millisecond)
	clients := []*locking.Client{newClient(t, rdbs, opt), newClient(t, second, opt)}
	if err := clients[0].Prepare(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return ps, clients
}

// pathFaults injects, one at a time on a random master's path, for 30-500
// ms each (longer than a lease's ttl at times, so extensions fail and
// leases end while their holders hold on): latency one way (20-150 ms, beyond the master timeout at times),
// a blackhole (calls time out), a connection cut partway through a
// command on its way to Redis (1-120 bytes in), and a reply lost with its
// connection after the script ran; then up to 200 ms without a fault.
// Holds last up to twice the ttl: they live on auto-extension.
func pathFaults(t *testing.T, seed uint64, ps []*redistest.Proxy) func(ctx context.Context) {
	return func(ctx context.Context) {
		rng := rand.New(rand.NewPCG(seed, 3))
		for ctx.Err() == nil {
			p := ps[rng.IntN(len(ps))]
			var err error
			switch rng.IntN(4) {
			case 0:
				err = p.AddLatency(time.Duration(20+rng.IntN(130))*time.Millisecond, rng.IntN(2) == 0)
			case 1:
				err = p.Blackhole()
			case 2:
				err = p.CloseAfter(int64(1+rng.IntN(120)), true) // mid-command
			case 3:
				err = p.CloseAfter(0, false) // the reply dies
			}
			if err != nil {
				t.Error(err)
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(30+rng.IntN(470)) * time.Millisecond):
			}
			if err := p.Restore(); err != nil {
				t.Error(err)
				return
			}
			sleepCtx(ctx, time.Duration(rng.IntN(200))*time.Millisecond) // a healthy spell
		}
	}
}

// Latency, timeouts, connections cut mid-script and lost replies on the
// client-Redis path, on one master and on three.
func TestScheduleFaultyPaths(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("masters=%d", n), func(t *testing.T) {
			ps, clients := faultyClients(t, n)
			checked(t, 3*time.Second, clients, 400*time.Millisecond, pathFaults(t, uint64(n), ps))
		})
	}
}

// Masters killed and restarted empty, and restarted from a stale snapshot,
// one at a time under the load, in a quorum of three and of five; then
// every master restarted empty at once. The clients are strict (no
// fresh-deployment opt-in): a restarted master grants nothing for the
// quarantine.
func TestScheduleMasterRestarts(t *testing.T) {
	const ttl, q = 300 * time.Millisecond, 700 * time.Millisecond
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("masters=%d", n), func(t *testing.T) {
			servers := redistest.NewN(t, n)
			deploy(t, servers...)
			clients := []*locking.Client{strict(t, clientsOf(t, servers...), q), strict(t, clientsOf(t, servers...), q)}
			checked(t, 4*time.Second, clients, ttl, func(ctx context.Context) {
				rng := rand.New(rand.NewPCG(uint64(n), 5))
				for i := 0; ctx.Err() == nil; i++ {
					s := servers[rng.IntN(len(servers))]
					var err error
					if i%2 == 0 {
						err = s.Restart() // empty
					} else if err = s.Save(); err == nil {
						// writes after the snapshot are lost by the restart
						sleepCtx(ctx, time.Duration(50+rng.IntN(200))*time.Millisecond)
						err = s.RestartFromSnapshot()
					}
					if err != nil {
						t.Error(err)
						return
					}
					sleepCtx(ctx, time.Duration(200+rng.IntN(400))*time.Millisecond)
				}
			})
		})
	}
	t.Run("all masters at once", func(t *testing.T) {
		servers := redistest.NewN(t, 3)
		deploy(t, servers...)
		clients := []*locking.Client{strict(t, clientsOf(t, servers...), q), strict(t, clientsOf(t, servers...), q)}
		checked(t, 4*time.Second, clients, ttl, func(ctx context.Context) {
			sleepCtx(ctx, time.Second)
			var wg sync.WaitGroup
			for _, s := range servers {
				wg.Go(func() {
					if err := s.Restart(); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		})
	})
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// A holder process frozen (SIGSTOP) past its ttl while it holds the lock,
// then resumed: meanwhile another holder takes the lock and writes; the
// resumed one must not act on its lease (it believed it only up to its
// validity deadline), and a write it had decided on before the freeze is
// refused by the store.
func TestScheduleHolderFrozenPastTTL(t *testing.T) {
	srv := redistest.New(t)
	c := newClient(t, []*redis.Client{srv.TestClient(t)})
	h := histcheck.New()
	store := h.Store()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"=writer frozen", holdRedisEnv+"="+srv.Addr())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var frozen *histcheck.Lease
	ns := func(s string) time.Time {
		var n int64
		_, _ = fmt.Sscan(s, &n)
		return time.Unix(0, n)
	}
	// apply reads the holder's lines: "held FENCE ASKED ACQUIRED DEADLINE",
	// "write FENCE AT", "lost AT DEADLINE", until stop is seen or the
	// channel is drained (a nil stop reads what is there)
	apply := func(until string, d time.Duration) {
		timeout := time.After(d)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					return
				}
				f := strings.Fields(l)
				switch f[0] {
				case "held":
					var fence int64
					_, _ = fmt.Sscan(f[1], &fence)
					frozen = h.Acquired("frozen", "frozen", false, fence, ns(f[2]), ns(f[3]), ns(f[4]))
				case "write":
					var fence int64
					_, _ = fmt.Sscan(f[1], &fence)
					store.Write("frozen", "frozen", fence, ns(f[2]))
				case "lost":
					frozen.Ended(ns(f[1]), ns(f[2]), "noticed the lease ended on resume")
				}
				if f[0] == until {
					return
				}
			case <-timeout:
				if until != "" {
					t.Fatalf("no %q line from the holder within %v", until, d)
				}
				return
			}
		}
	}
	apply("write", 20*time.Second)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	// the next holder, after the frozen one's key expired
	lctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
	asked := time.Now()
	l, err := c.Lock(lctx, "frozen", time.Second)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	next := h.Acquired("next", "frozen", false, l.Fence(), asked, time.Now(), l.Deadline())
	store.Write("next", "frozen", l.Fence(), time.Now())
	if time.Since(frozenAt) < holdTTL/2 {
		t.Fatalf("the lock passed on %v after the holder froze, before its ttl", time.Since(frozenAt))
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	apply("lost", 20*time.Second)
	next.Ended(time.Now(), l.Deadline(), "released")
	_ = l.Release(testCtx(t))
	apply("", 200*time.Millisecond)
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	linearizable(t, mutexModel, h)
	if c := h.Counts(); c.Leases != 2 {
		t.Fatalf("counts %+v", c)
	}
}

// Deterministic fault schedules: they make the rare events of the random
// schedules happen every time.

// A schedule that makes a lease end while another client waits for the
// key, every time: the holder's path to its master is blackholed (1) right
// after it acquired, (2) after one extension, (3) after one extension whose
// reply came 80 ms late. The waiter gets the key once it expired in Redis;
// the holder must have stopped believing by then. Passes on the code as it
// is; catches a lock that believes a lease longer than its key lives, at
// acquisition or extension, including a deadline measured from the reply
// instead of the send (mutations the random schedules catch seldom or
// never).
func TestScheduleHolderCutOffWhileOthersWait(t *testing.T) {
	const ttl = 400 * time.Millisecond
	srv := redistest.New(t)
	p := redistest.NewTestProxy(t, srv.Addr())
	a := newClient(t, []*redis.Client{through(t, srv, p)}, locking.WithMasterTimeout(100*time.Millisecond))
	b := newClient(t, []*redis.Client{srv.TestClient(t)})
	h := histcheck.New()
	store := h.Store()
	for _, round := range []struct {
		name    string
		latency time.Duration // on the holder's reply path
		before  time.Duration // held before the blackhole
	}{
		{"cut at once", 0, 0},
		{"cut after an extension", 0, ttl/3 + 80*time.Millisecond},
		{"cut after a late-answered extension", 80 * time.Millisecond, ttl/3 + 160*time.Millisecond},
	} {
		key := round.name
		if round.latency > 0 {
			if err := p.AddLatency(round.latency, false); err != nil {
				t.Fatal(err)
			}
		}
		asked := time.Now()
		l, err := a.Lock(testCtx(t), key, ttl)
		if err != nil {
			t.Fatal(err)
		}
		ra := h.Acquired("holder", key, false, l.Fence(), asked, time.Now(), l.Deadline())
		var wg sync.WaitGroup
		wg.Go(func() { // the holder writes while it believes it holds the key
			for {
				at := time.Now()
				if l.Err() != nil {
					ra.Ended(time.Now(), l.Deadline(), l.Err().Error())
					return
				}
				store.Write("holder", key, l.Fence(), at)
				time.Sleep(2 * time.Millisecond) // real time: the holder writes every 2ms while it believes it holds the key
			}
		})
		wg.Go(func() { // the waiter
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			asked := time.Now()
			lb, err := b.Lock(ctx, key, ttl, locking.WithAutoExtend(false))
			if err != nil {
				t.Error(err)
				return
			}
			rb := h.Acquired("waiter", key, false, lb.Fence(), asked, time.Now(), lb.Deadline())
			store.Write("waiter", key, lb.Fence(), time.Now())
			time.Sleep(20 * time.Millisecond) // real time: the waiter stays in a moment, so an overlapping write of the holder would be seen
			rb.Ended(time.Now(), lb.Deadline(), "released")
			_ = lb.Release(context.Background())
		})
		time.Sleep(round.before) // real time: held before the blackhole, against the extension rhythm (ttl/3) on Redis's clock
		if err := p.Blackhole(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := p.Restore(); err != nil {
			t.Fatal(err)
		}
		_ = l.Release(context.Background())
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	linearizable(t, mutexModel, h)
	t.Logf("%+v", h.Counts())
}

// G4 across snapshot reloads: TestScheduleMasterRestarts reloads one
// master at a time from a stale snapshot, so a majority always carries the
// current fencing counter and the fence floor (the counter lifted to the
// marker's floor after a restart) is never needed: removing it passes that
// schedule. Here a majority (2 of 3) is reloaded, twice, from snapshots
// taken at once, while the load runs. Passes on the code as it is; fails
// ("fence order") when the floor is dropped.
func TestScheduleMajorityFromStaleSnapshots(t *testing.T) {
	const ttl, q = 300 * time.Millisecond, 700 * time.Millisecond
	servers := redistest.NewN(t, 3)
	deploy(t, servers...)
	clients := []*locking.Client{strict(t, clientsOf(t, servers...), q), strict(t, clientsOf(t, servers...), q)}
	checked(t, 5*time.Second, clients, ttl, func(ctx context.Context) {
		all := func(f func(s *redistest.Server) error) {
			var wg sync.WaitGroup
			for _, s := range servers[:2] {
				wg.Go(func() {
					if err := f(s); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
		for range 2 {
			sleepCtx(ctx, 400*time.Millisecond)
			all((*redistest.Server).Save)                // the two snapshots as close together as can be
			sleepCtx(ctx, 900*time.Millisecond)          // grants after them: lost by the reload
			all((*redistest.Server).RestartFromSnapshot) // a majority reloaded
			sleepCtx(ctx, q)                             // their quarantine
		}
	})
}

// ---------------------------------------------------------------------------
// Schedules that hold (regression tests)
// ---------------------------------------------------------------------------

// grantLedger records who holds what and checks the read/write invariant at
// every entry: no valid writer lease beside any other valid lease. Valid
// means Err() == nil, which also ends a lease whose deadline has passed.
type grantLedger struct {
	t    *testing.T
	mu   sync.Mutex
	live map[*locking.Lease]bool // lease -> writer
	log  []ledgerGrant
	bad  atomic.Int32
}

type ledgerGrant struct {
	writer        bool
	fence         int64
	called, got   time.Time
	key, holderID string
}

func newLedger(t *testing.T) *grantLedger {
	return &grantLedger{t: t, live: map[*locking.Lease]bool{}}
}

func (g *grantLedger) enter(l *locking.Lease, writer bool, called time.Time) {
	got := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.log = append(g.log, ledgerGrant{writer: writer, fence: l.Fence(), called: called, got: got, key: l.Key()})
	if l.Err() != nil {
		return // ended already: not inside
	}
	for o, ow := range g.live {
		if (writer || ow) && o.Err() == nil {
			if g.bad.Add(1) <= 3 {
				g.t.Errorf("overlap: %s (writer=%v, fence %d) entered while %s (writer=%v, fence %d, deadline in %v) was valid",
					l.Key(), writer, l.Fence(), o.Key(), ow, o.Fence(), time.Until(o.Deadline()))
			}
		}
	}
	g.live[l] = writer
}

func (g *grantLedger) leave(l *locking.Lease) {
	g.mu.Lock()
	delete(g.live, l)
	g.mu.Unlock()
}

// fences: a writer's fence is above that of every lease granted before the
// writer asked, and every lease asked after a writer was granted has a
// higher fence than the writer's.
func (g *grantLedger) checkFences() {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, a := range g.log {
		for _, b := range g.log {
			if !(a.writer || b.writer) || !a.got.Before(b.called) {
				continue
			}
			if b.fence <= a.fence && n < 3 {
				n++
				g.t.Errorf("fence %d (writer=%v) granted after fence %d (writer=%v) had been granted", b.fence, b.writer, a.fence, a.writer)
			}
		}
	}
}

// proxyChaos injects one fault at a time on a random proxy until stop: added
// latency (either way), a cut, a blackhole, or replies lost with their
// connection; each lasts 50-250ms and is then undone.
func proxyChaos(t *testing.T, seed uint64, ps []*redistest.Proxy, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 12))
	for {
		select {
		case <-stop:
			return
		case <-time.After(time.Duration(20+rng.IntN(80)) * time.Millisecond):
		}
		p := ps[rng.IntN(len(ps))]
		var err error
		switch rng.IntN(4) {
		case 0:
			err = p.AddLatency(time.Duration(20+rng.IntN(150))*time.Millisecond, rng.IntN(2) == 0)
		case 1:
			err = p.Cut()
		case 2:
			err = p.Blackhole()
		case 3:
			err = p.CloseAfter(0, false)
		}
		if err != nil {
			t.Error(err)
			return
		}
		time.Sleep(time.Duration(50+rng.IntN(200)) * time.Millisecond) // real time: the fault lasts 50-250ms against leases that Redis's clock ends
		if err := p.Restore(); err != nil {
			t.Error(err)
			return
		}
	}
}

// running reports whether stop is still open.
func running(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	default:
		return true
	}
}

// Three masters, every connection through a proxy that suffers latency,
// cuts, blackholes and lost replies (one master at a time); two clients,
// readers and writers with short auto-extended leases, some holding past
// their ttl: a writer is never inside with a valid lease beside any other
// valid lease, and fences grow across writers. The holdings are recorded
// and checked by histcheck and by porcupine against a read/write lock.
func TestRWQuorumUnderChaos(t *testing.T) {
	for _, n := range []int{3, 1} {
		t.Run(fmt.Sprintf("masters=%d", n), func(t *testing.T) { rwChaos(t, n) })
	}
}

func rwChaos(t *testing.T, n int) {
	servers := redistest.NewN(t, n)
	ps := make([]*redistest.Proxy, n)
	for i, s := range servers {
		ps[i] = redistest.NewTestProxy(t, s.Addr())
	}
	var clients []*locking.Client
	for range 2 {
		rdbs := make([]*redis.Client, n)
		for i, s := range servers {
			rdbs[i] = through(t, s, ps[i])
		}
		clients = append(clients, newClient(t, rdbs, locking.WithMasterTimeout(150*time.Millisecond)))
	}
	if err := clients[0].Prepare(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	g := newLedger(t)
	h := histcheck.New()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { proxyChaos(t, 1, ps, stop) })
	var grants atomic.Int32
	deadline := time.Now().Add(time.Duration(2+n) * time.Second)
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			m, _ := clients[w%2].RWMutex("rv-chaos")
			for running(stop) {
				writer := rng.IntN(3) == 0
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				called := time.Now()
				var l *locking.Lease
				var err error
				if writer {
					l, err = m.Lock(ctx, 600*time.Millisecond)
				} else {
					l, err = m.RLock(ctx, 600*time.Millisecond)
				}
				cancel()
				if err != nil {
					continue
				}
				rec := h.Acquired(fmt.Sprintf("client%d/g%d", w%2, w), "rv-chaos", !writer, l.Fence(), called, time.Now(), l.Deadline())
				grants.Add(1)
				g.enter(l, writer, called)
				hold := time.Duration(rng.IntN(20)) * time.Millisecond
				if rng.IntN(10) == 0 {
					hold = 900 * time.Millisecond // past the ttl: extensions must carry it
				}
				select {
				case <-time.After(hold):
				case <-l.Done():
				}
				ended(rec, l)
				g.leave(l)
				rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
				_ = l.Release(rctx)
				rcancel()
			}
		})
	}
	// the chaos lasts its time, and on a busy host until the clients got
	// enough grants to exercise the locks (they are few under chaos when
	// every call is slow): an event, bounded only to catch a livelock
	time.Sleep(time.Until(deadline)) // real time: the chaos runs; leases expire by the masters' clocks
	poll.Until(time.Minute, func() bool { return grants.Load() >= 10 })
	close(stop)
	wg.Wait()
	for _, p := range ps {
		_ = p.Restore()
	}
	g.checkFences()
	if grants.Load() < 10 {
		t.Errorf("only %d grants under chaos: the test exercised little", grants.Load())
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	linearizable(t, rwModel, h)
	t.Logf("%d grants", grants.Load())
}

// The slot semaphore on three masters under the same chaos: never more than
// its limit of valid leases at once. The holdings are recorded and checked
// by histcheck and by porcupine against a semaphore of fenced slots.
func TestSlotSemaphoreQuorumUnderChaos(t *testing.T) {
	servers := redistest.NewN(t, 3)
	ps := make([]*redistest.Proxy, 3)
	for i, s := range servers {
		ps[i] = redistest.NewTestProxy(t, s.Addr())
	}
	var clients []*locking.Client
	for range 2 {
		rdbs := make([]*redis.Client, 3)
		for i, s := range servers {
			rdbs[i] = through(t, s, ps[i])
		}
		clients = append(clients, newClient(t, rdbs, locking.WithMasterTimeout(150*time.Millisecond)))
	}
	if err := clients[0].Prepare(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	const limit = 2
	var mu sync.Mutex
	live := map[*locking.Lease]bool{}
	var grants, bad atomic.Int32
	h := histcheck.New()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { proxyChaos(t, 2, ps, stop) })
	deadline := time.Now().Add(4 * time.Second)
	for w := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			s, _ := clients[w%2].Semaphore("rv-chaos-sem", limit)
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				asked := time.Now()
				l, err := s.Acquire(ctx, 500*time.Millisecond)
				cancel()
				if err != nil {
					continue
				}
				rec := h.AcquiredSlot(fmt.Sprintf("client%d/g%d", w%2, w), "rv-chaos-sem", limit, l.Key(), l.Fence(), asked, time.Now(), l.Deadline())
				grants.Add(1)
				mu.Lock()
				if l.Err() == nil {
					n := 1
					for o := range live {
						if o.Err() == nil {
							n++
						}
					}
					if n > limit && bad.Add(1) <= 3 {
						t.Errorf("%d valid holders of a semaphore of %d", n, limit)
					}
					live[l] = true
				}
				mu.Unlock()
				hold := time.Duration(rng.IntN(15)) * time.Millisecond
				if rng.IntN(10) == 0 {
					hold = 700 * time.Millisecond
				}
				select {
				case <-time.After(hold):
				case <-l.Done():
				}
				ended(rec, l)
				mu.Lock()
				delete(live, l)
				mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
				_ = l.Release(rctx)
				rcancel()
			}
		})
	}
	time.Sleep(time.Until(deadline)) // real time: the chaos runs; leases expire by the masters' clocks
	close(stop)
	wg.Wait()
	if grants.Load() < 10 {
		t.Errorf("only %d grants under chaos", grants.Load())
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	linearizable(t, semaphoreModel, h)
	t.Logf("%d grants", grants.Load())
}

// ended records the end of l's holding as its holder sees it now: lost
// (the lease's own reason) or about to be released.
func ended(rec *histcheck.Lease, l *locking.Lease) {
	why := "released"
	if err := l.Err(); err != nil {
		why = err.Error()
	}
	rec.Ended(time.Now(), l.Deadline(), why)
}
