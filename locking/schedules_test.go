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
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/histcheck"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// Fault schedules: each runs a recording lock workload (histcheck.LockLoad:
// holders write to a fencing store while they believe they hold the lock)
// while faults run, then checks the history: no two believed-held intervals
// of a key overlap, fences follow acquisition order, no stale write was
// accepted. A schedule also requires that the load made progress.

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
	if c := h.Counts(); c.Leases != 2 {
		t.Fatalf("counts %+v", c)
	}
}
