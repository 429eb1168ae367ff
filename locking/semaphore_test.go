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

// 16 contenders over two clients, a semaphore of 4: never more than 4
// hold at once, and every contender gets its turns; the same for a fair
// semaphore, and for slots on a quorum of three masters.
func TestSemaphoreNeverMoreThanLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		masters int
		fair    bool
	}{{"slots", 1, false}, {"fair", 1, true}, {"slots-quorum", 3, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var servers []*redistest.Server
			for range tc.masters {
				servers = append(servers, redistest.New(t))
			}
			clients := []*locking.Client{newClient(t, clientsOf(t, servers...)), newClient(t, clientsOf(t, servers...))}
			semaphoreLimit(t, clients, tc.fair)
		})
	}
}

func semaphoreLimit(t *testing.T, clients []*locking.Client, fair bool) {
	ctx := testCtx(t)
	var holding, most atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			sem, err := clients[g%2].Semaphore("pool", 4)
			if fair {
				sem, err = clients[g%2].FairSemaphore("pool", 4)
			}
			if err != nil {
				t.Error(err)
				return
			}
			for range 5 {
				l, err := sem.Acquire(ctx, 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(3 * time.Millisecond) // real time: a short hold
				holding.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 4 || m < 2 {
		t.Errorf("at most %d held at once, want up to 4 (and some concurrency)", m)
	}
}

// A holder that crashed (its lease never released nor extended) frees its
// slot at its ttl; TryAcquire on a full semaphore says not obtained.
func TestSemaphoreCrashedHolderFreesItsSlot(t *testing.T) {
	srv := redistest.New(t)
	c := newClient(t, []*redis.Client{srv.TestClient(t)}, locking.WithFreshDeployment())
	ctx := testCtx(t)
	sem, err := c.Semaphore("one", 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(ctx, 500*time.Millisecond, locking.WithAutoExtend(false)); err != nil { // the crashed holder
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(ctx, time.Second); !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("TryAcquire on a full semaphore = %v, want not obtained", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	l, err := sem.Acquire(wctx, time.Second)
	if err != nil {
		t.Fatalf("Acquire after the crashed holder's ttl: %v", err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("acquired after %v, while the crashed holder's slot was still held", waited)
	}
	_ = l.Release(ctx)
	if _, err := c.Semaphore("", 1); !errors.Is(err, locking.ErrInvalid) {
		t.Errorf("an empty name: %v", err)
	}
}

// A fair semaphore serves waiters in the order they came: with its one
// place held, three waiters queue one after the other, and each release
// lets in the next of them; TryAcquire does not jump the queue.
func TestFairSemaphoreServesInOrder(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	sem, err := c.FairSemaphore("printer", 1)
	if err != nil {
		t.Fatal(err)
	}
	first, err := sem.TryAcquire(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type got struct {
		who int
		l   *locking.Lease
	}
	in := make(chan got, 3)
	for who := range 3 {
		go func() {
			l, err := sem.Acquire(ctx, 20*time.Second)
			if err != nil {
				t.Error(err)
			}
			in <- got{who, l}
		}()
		registered(t, rdb, "fsem:printer", int64(who+1)) // queued behind the one before
	}
	prev := first
	for want := range 3 {
		if err := prev.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if want == 0 {
			// the place is free, but waiters queue: a newcomer does not take it
			if l, err := sem.TryAcquire(ctx, time.Second); err == nil {
				// the head may not have taken it yet; either way this is a barge
				_ = l.Release(ctx)
				t.Fatal("TryAcquire took the place ahead of the queue")
			}
		}
		select {
		case g := <-in:
			if g.who != want {
				t.Fatalf("waiter %d got in, want %d", g.who, want)
			}
			if g.l.Fence() <= prev.Fence() {
				t.Errorf("fence %d after %d, want increasing", g.l.Fence(), prev.Fence())
			}
			prev = g.l
		case <-time.After(15 * time.Second): // below the 20s ttls: woken, not timed out
			t.Fatalf("waiter %d not let in after the release", want)
		}
	}
	_ = prev.Release(ctx)
}

// The limit is the caller's: a caller with a lower limit waits until the
// holders are fewer than it; a fair semaphore refuses several masters.
func TestFairSemaphoreLimitCanChange(t *testing.T) {
	srv := redistest.New(t)
	c := newClient(t, []*redis.Client{srv.TestClient(t)})
	ctx := testCtx(t)
	wide, _ := c.FairSemaphore("db", 3)
	narrow, _ := c.FairSemaphore("db", 2)
	var held []*locking.Lease
	for range 2 {
		l, err := wide.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	if _, err := narrow.TryAcquire(ctx, time.Second); !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("limit 2 with 2 holding = %v, want not obtained", err)
	}
	l, err := wide.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("limit 3 with 2 holding: %v", err)
	}
	_ = l.Release(ctx)
	_ = held[0].Release(ctx)
	if l, err := narrow.TryAcquire(ctx, time.Second); err != nil {
		t.Fatalf("limit 2 with 1 holding: %v", err)
	} else {
		_ = l.Release(ctx)
	}
	_ = held[1].Release(ctx)

	s2, s3 := redistest.New(t), redistest.New(t)
	q := newClient(t, clientsOf(t, srv, s2, s3))
	if _, err := q.FairSemaphore("db", 2); !errors.Is(err, locking.ErrInvalid) {
		t.Errorf("a fair semaphore on three masters: %v, want invalid", err)
	}
}
