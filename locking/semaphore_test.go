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
// hold at once, and every contender gets its turns.
func TestSemaphoreNeverMoreThanLimit(t *testing.T) {
	srv := redistest.New(t)
	clients := []*locking.Client{
		newClient(t, []*redis.Client{srv.TestClient(t)}, locking.WithFreshDeployment()),
		newClient(t, []*redis.Client{srv.TestClient(t)}, locking.WithFreshDeployment()),
	}
	ctx := testCtx(t)
	var holding, most atomic.Int32
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			sem, err := clients[g%2].Semaphore("pool", 4)
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
	if _, err := sem.TryAcquire(ctx, 500*time.Millisecond); err != nil { // the crashed holder
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
