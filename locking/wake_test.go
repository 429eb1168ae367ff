package locking_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// counter counts the commands a go-redis client sends.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// A waiter is woken by the release, not by the holder's ttl running out.
func TestWaiterWokenOnRelease(t *testing.T) {
	for _, n := range []int{1, 3} {
		servers := redistest.NewN(t, n)
		holder := newClient(t, clientsOf(t, servers...))
		waiter := newClient(t, clientsOf(t, servers...))
		ctx := testCtx(t)
		l, err := holder.Lock(ctx, "w", 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			l2, err := waiter.Lock(ctx, "w", time.Second)
			if err != nil {
				t.Error(err)
				got <- time.Time{}
				return
			}
			got <- time.Now()
			_ = l2.Release(ctx)
		}()
		registered(t, servers[0].TestClient(t), "w", 1)
		released := time.Now()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		at := <-got
		// the ttl is 20s: anything under a second is the wake-up (the
		// benchmark measures how far under)
		if d := at.Sub(released); d > time.Second {
			t.Fatalf("%d masters: waiter took %v after release", n, d)
		} else {
			t.Logf("%d masters: waiter acquired %v after release began", n, d)
		}
	}
}

// Many waiters on one key: each release wakes one waiter, so the waiters send
// a bounded number of commands per acquisition instead of stampeding. The
// first round warms the waiters' client up (it is not measured): its
// subscription's confirmation wakes every waiter once to re-check (a release
// may have come before it listened), and its pool dials a connection per
// concurrent waiter, each with its restart check.
func TestWaitersDoNotStampede(t *testing.T) {
	s := redistest.New(t)
	var cnt counter
	rdb := s.TestClient(t)
	rdb.AddHook(&cnt)
	waiters := newClient(t, []*redis.Client{rdb})
	holder := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	const n = 20
	round := func(key string) float64 {
		l, err := holder.Lock(ctx, key, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if err := waiters.Hold(ctx, key, 20*time.Second, func(context.Context) error { return nil }); err != nil {
					t.Error(err)
				}
			})
		}
		registered(t, s.TestClient(t), key, n)
		before := cnt.n.Load()
		_ = l.Release(ctx)
		wg.Wait()
		return float64(cnt.n.Load()-before) / n
	}
	round("warm")
	per := round("s")
	t.Logf("%.1f commands per acquisition by %d waiters", per, n)
	if per > 4 {
		t.Fatalf("%.1f commands per acquisition: waiters stampede", per)
	}
}

func TestLockHonoursContext(t *testing.T) {
	s := redistest.New(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l, err := c.Lock(ctx, "ctx", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for _, fair := range []bool{false, true} {
		var opts []locking.LockOption
		if fair {
			opts = append(opts, locking.WithFair())
		}
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err = c.Lock(wctx, "ctx", time.Second, opts...)
		cancel()
		if !errors.Is(err, locking.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("fair=%v: Lock past its deadline = %v, want ErrNotObtained and DeadlineExceeded", fair, err)
		}
	}
	// the waiters left the queues
	rdb := s.TestClient(t)
	if n, _ := rdb.LLen(ctx, "baton:lock:{ctx}:q").Result(); n != 0 {
		t.Fatalf("fair queue still holds %d waiters", n)
	}
	if n, _ := rdb.ZCard(ctx, "baton:lock:{ctx}:w").Result(); n != 0 {
		t.Fatalf("waiter set still holds %d waiters", n)
	}
}

// Fair mode: waiters get the lock in arrival order, and the releaser cannot
// jump the queue.
func TestFairModeIsFIFO(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l, err := c.Lock(ctx, "fifo", 20*time.Second, locking.WithFair())
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	order := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := c.Hold(ctx, "fifo", 20*time.Second, func(context.Context) error {
				order <- i
				return nil
			}, locking.WithFair())
			if err != nil {
				t.Error(err)
			}
		})
		registered(t, rdb, "fifo", int64(i+1)) // i queues before i+1
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// the releaser comes straight back: it must queue behind the others
	again, err := c.Lock(ctx, "fifo", 20*time.Second, locking.WithFair())
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d got the lock in turn %d", got, want)
		}
		want++
	}
	if want != n {
		t.Fatalf("only %d of %d waiters ran before the releaser", want, n)
	}
	_ = again.Release(ctx)
}

// A fair waiter that died is skipped once its queue entry expires.
func TestFairModeSkipsDeadWaiter(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	c := newClient(t, clientsOf(t, s))
	ctx := testCtx(t)
	l, err := c.Lock(ctx, "dead", 20*time.Second, locking.WithFair())
	if err != nil {
		t.Fatal(err)
	}
	// a waiter from a process that died: queued, with an entry that already expired
	rdb.RPush(ctx, "baton:lock:{dead}:q", "ghost")
	rdb.HSet(ctx, "baton:lock:{dead}:qd", "ghost", "1:1000")
	got := make(chan error, 1)
	go func() {
		err := c.Hold(ctx, "dead", time.Second, func(context.Context) error { return nil }, locking.WithFair())
		got <- err
	}()
	registered(t, rdb, "dead", 2)
	_ = l.Release(ctx)
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("live waiter not served after a dead one")
	}
}
