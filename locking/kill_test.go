package locking_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// The tests here take a primitive in a separate process (this test binary
// run as a holder) and SIGKILL it mid-hold: no release, no leave, no last
// extension. What it held stays respected until its ttl, then frees.
const (
	holdEnv      = "LOCKING_TEST_HOLD"  // what the holder takes: see holdUntilKilled
	holdRedisEnv = "LOCKING_TEST_REDIS" // the server's address
	holdTTL      = time.Second          // every holder's ttl (auto-extended while it lives)
)

// holdUntilKilled is the holder process: it takes what spec names on the
// server at addr, prints "held" and blocks until killed. Specs: "read NAME",
// "write NAME" (a read/write lock), "sem NAME LIMIT", "fairsem NAME LIMIT",
// "all KEY..." (LockAll), "fill KEY" (blocks inside compute). A holder that
// waits ("write" behind readers, "all" behind a held key) blocks in the
// wait: the test watches Redis for it.
func holdUntilKilled(spec, addr string) int {
	f := strings.Fields(spec)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	c, err := locking.New(rdb, locking.WithFreshDeployment())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx := context.Background()
	var limit int
	if len(f) > 2 {
		_, _ = fmt.Sscan(f[2], &limit)
	}
	switch f[0] {
	case "read", "write":
		m, _ := c.RWMutex(f[1])
		if f[0] == "read" {
			_, err = m.RLock(ctx, holdTTL)
		} else {
			_, err = m.Lock(ctx, holdTTL)
		}
	case "sem", "fairsem":
		s, _ := c.Semaphore(f[1], limit)
		if f[0] == "fairsem" {
			s, _ = c.FairSemaphore(f[1], limit)
		}
		_, err = s.Acquire(ctx, holdTTL)
	case "all":
		_, err = c.LockAll(ctx, f[1:], holdTTL)
	case "writer": // a holder that writes every 5ms while its lease is valid, and says so
		l, err := c.Lock(ctx, f[1], holdTTL, locking.WithAutoExtend(false))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		fmt.Printf("held %d %d %d %d\n", l.Fence(), time.Now().UnixNano(), time.Now().UnixNano(), l.Deadline().UnixNano())
		for {
			at := time.Now()
			if l.Err() != nil {
				fmt.Printf("lost %d %d\n", time.Now().UnixNano(), l.Deadline().UnixNano())
				select {}
			}
			fmt.Printf("write %d %d\n", l.Fence(), at.UnixNano())
			time.Sleep(5 * time.Millisecond) // real time: the writer process writes every 5ms while its lease, ended by Redis's clock, is valid
		}
	case "fill":
		_, err = c.Fill(ctx, rdb, f[1], time.Minute, func(ctx context.Context) ([]byte, error) {
			fmt.Println("held")
			select {}
		}, locking.WithFillLockTTL(holdTTL))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("held")
	select {}
}

// holder runs holdUntilKilled(spec) in a new process and returns a func
// that SIGKILLs it. With await it first waits for the process to say
// "held".
func holder(t *testing.T, srv *redistest.Server, spec string, await bool) (kill func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holdEnv+"="+spec, holdRedisEnv+"="+srv.Addr())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	kill = func() {
		if !killed {
			killed = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(kill)
	if await {
		line := make(chan string, 1)
		go func() {
			s, _ := bufio.NewReader(out).ReadString('\n')
			line <- s
		}()
		select {
		case s := <-line:
			if strings.TrimSpace(s) != "held" {
				t.Fatalf("holder %q said %q", spec, s)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("holder %q did not take hold", spec)
		}
	}
	return kill
}

// refusedThenFreed checks what a killed holder leaves: try fails at once
// (its hold is still respected: it may not have died, only gone quiet), and
// wait succeeds within its ttl and the slack of a waiter's entry.
func refusedThenFreed(t *testing.T, what string, try func(context.Context) (func(), error), wait func(context.Context) (func(), error)) {
	t.Helper()
	ctx := testCtx(t)
	if release, err := try(ctx); err == nil {
		release()
		t.Fatalf("%s: taken right after the holder was killed, while its hold was live", what)
	} else if !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("%s: %v", what, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	release, err := wait(wctx)
	if err != nil {
		t.Fatalf("%s: still not free after the killed holder's ttl: %v", what, err)
	}
	release()
}

// lease adapts a lease-returning call for refusedThenFreed.
func lease(l *locking.Lease, err error) (func(), error) {
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Release(context.Background()) }, nil
}

// A reader killed mid-hold keeps writers out until its share's ttl, then
// frees it; a writer killed mid-hold keeps readers out until its ttl.
func TestKilledReadWriteHolders(t *testing.T) {
	srv := redistest.New(t)
	c := newClient(t, []*redis.Client{srv.TestClient(t)})
	m, _ := c.RWMutex("acct")
	ttl := 2 * time.Second

	kill := holder(t, srv, "read acct", true)
	kill()
	refusedThenFreed(t, "write after a killed reader",
		func(ctx context.Context) (func(), error) { return lease(m.TryLock(ctx, ttl)) },
		func(ctx context.Context) (func(), error) { return lease(m.Lock(ctx, ttl)) })

	kill = holder(t, srv, "write acct", true)
	kill()
	refusedThenFreed(t, "read after a killed writer",
		func(ctx context.Context) (func(), error) { return lease(m.TryRLock(ctx, ttl)) },
		func(ctx context.Context) (func(), error) { return lease(m.RLock(ctx, ttl)) })
}

// A writer killed while it waited behind a reader leaves an intent that
// keeps new readers out for a while, then lapses: it cannot starve them.
func TestKilledWaitingWriterCannotStarveReaders(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	m, _ := c.RWMutex("feed")
	r, err := m.RLock(ctx, time.Second) // auto-extended: the writer waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Release(ctx) }()
	kill := holder(t, srv, "write feed", false)
	poll.Require(t, 20*time.Second, "the waiting writer's intent", func() bool {
		return rdb.ZCard(ctx, "baton:lock:{rw:feed}:wi").Val() == 1
	})
	kill()
	refusedThenFreed(t, "read after a killed waiting writer",
		func(ctx context.Context) (func(), error) { return lease(m.TryRLock(ctx, time.Second)) },
		func(ctx context.Context) (func(), error) { return lease(m.RLock(ctx, time.Second)) })
}

// A semaphore holder killed mid-hold keeps its place until its ttl: the
// limit holds throughout, and the place frees.
func TestKilledSemaphoreHolder(t *testing.T) {
	for _, kind := range []string{"sem", "fairsem"} {
		t.Run(kind, func(t *testing.T) {
			srv := redistest.New(t)
			c := newClient(t, []*redis.Client{srv.TestClient(t)})
			ctx := testCtx(t)
			s, _ := c.Semaphore("pool", 2)
			if kind == "fairsem" {
				s, _ = c.FairSemaphore("pool", 2)
			}
			kill := holder(t, srv, kind+" pool 2", true)
			mine, err := s.TryAcquire(ctx, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = mine.Release(ctx) }()
			kill()
			refusedThenFreed(t, "a place after a killed holder",
				func(ctx context.Context) (func(), error) { return lease(s.TryAcquire(ctx, time.Second)) },
				func(ctx context.Context) (func(), error) { return lease(s.Acquire(ctx, time.Second)) })
		})
	}
}

// A multi-lock holder killed mid-hold, and one killed while it held part of
// its set and waited for the rest: everything it held frees at its ttl, and
// no one meanwhile gets a key of its set.
func TestKilledMultiLockHolders(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)

	kill := holder(t, srv, "all inv:c inv:d", true)
	kill()
	refusedThenFreed(t, "the set of a killed holder",
		func(ctx context.Context) (func(), error) {
			m, err := c.TryLockAll(ctx, []string{"inv:d", "inv:c"}, time.Second)
			if err != nil {
				return nil, err
			}
			return func() { _ = m.Release(ctx) }, nil
		},
		func(ctx context.Context) (func(), error) {
			m, err := c.LockAll(ctx, []string{"inv:d", "inv:c"}, time.Second)
			if err != nil {
				return nil, err
			}
			return func() { _ = m.Release(ctx) }, nil
		})

	b, err := c.TryLock(ctx, "inv:b", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kill = holder(t, srv, "all inv:a inv:b", false)
	poll.Require(t, 20*time.Second, "the holder with inv:a, waiting for inv:b", func() bool {
		return rdb.Exists(ctx, "baton:lock:{inv:a}").Val() == 1 && rdb.ZCard(ctx, "baton:lock:{inv:b}:w").Val() == 1
	})
	kill()
	_ = b.Release(ctx)
	refusedThenFreed(t, "the part a killed holder took",
		func(ctx context.Context) (func(), error) { return lease(c.TryLock(ctx, "inv:a", time.Second)) },
		func(ctx context.Context) (func(), error) { return lease(c.Lock(ctx, "inv:a", time.Second)) })
}

// A process killed while computing a fill holds the others off until the
// fill lock's ttl; then one of them computes.
func TestKilledFillComputer(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	kill := holder(t, srv, "fill rates", true)
	kill()
	if _, err := c.TryLock(ctx, "fill:rates", time.Second); !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("the killed computer's fill lock, right after: %v, want still held", err)
	}
	computed := 0
	v, err := c.Fill(ctx, rdb, "rates", time.Minute, func(context.Context) ([]byte, error) {
		computed++
		return []byte("1.08"), nil
	}, locking.WithFillLockTTL(time.Second))
	if err != nil || string(v) != "1.08" || computed != 1 {
		t.Fatalf("Fill after the killed computer = %q, %v (computed %d times)", v, err, computed)
	}
}
