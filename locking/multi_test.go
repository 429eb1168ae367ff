package locking_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// All or none: with one key of the set taken, TryLockAll fails and leaves
// the others free.
func TestTryLockAllIsAllOrNone(t *testing.T) {
	srv := redistest.New(t)
	c := newClient(t, []*redis.Client{srv.TestClient(t)}, locking.WithFreshDeployment())
	ctx := testCtx(t)
	held, err := c.TryLock(ctx, "inv:b", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLockAll(ctx, []string{"inv:c", "inv:a", "inv:b"}, 10*time.Second); !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("TryLockAll with inv:b taken = %v, want not obtained", err)
	}
	for _, k := range []string{"inv:a", "inv:c"} {
		l, err := c.TryLock(ctx, k, time.Second)
		if err != nil {
			t.Errorf("%s still held after the failed TryLockAll: %v", k, err)
			continue
		}
		_ = l.Release(ctx)
	}
	_ = held.Release(ctx)
	m, err := c.TryLockAll(ctx, []string{"inv:c", "inv:a", "inv:b", "inv:a"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ls := m.Leases()
	if len(ls) != 3 || ls[0].Key() != "inv:a" || ls[2].Key() != "inv:c" {
		t.Errorf("leases %v, want a, b, c once each in order", ls)
	}
	if err := m.Release(ctx); err != nil || m.Err() == nil {
		t.Errorf("Release = %v, Err after = %v", err, m.Err())
	}
}

// Sets that overlap, asked for in opposite orders by many goroutines over
// two clients: nobody deadlocks, and no key is ever held twice at once.
func TestLockAllOverlappingSetsNeitherDeadlockNorOverlap(t *testing.T) {
	srv := redistest.New(t)
	clients := []*locking.Client{
		newClient(t, []*redis.Client{srv.TestClient(t)}, locking.WithFreshDeployment()),
		newClient(t, []*redis.Client{srv.TestClient(t)}, locking.WithFreshDeployment()),
	}
	ctx := testCtx(t)
	sets := [][]string{{"x", "y"}, {"y", "x"}, {"y", "z"}, {"z", "x", "y"}}
	holders := map[string]*atomic.Int32{"x": {}, "y": {}, "z": {}}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 5 {
				set := sets[g%len(sets)]
				m, err := clients[g%2].LockAll(ctx, set, 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				for _, k := range set {
					if holders[k].Add(1) != 1 {
						t.Errorf("%s held twice at once", k)
					}
				}
				time.Sleep(2 * time.Millisecond) // real time: a short critical section
				for _, k := range set {
					holders[k].Add(-1)
				}
				if err := m.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

// The set's lease ends when one of its locks is lost.
func TestMultiLeaseEndsWithAnyLease(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb}, locking.WithFreshDeployment())
	ctx := testCtx(t)
	m, err := c.LockAll(ctx, []string{"p", "q"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, "baton:lock:{q}") // q's key gone (evicted, flushed): its extension fails
	select {
	case <-m.Done():
		if !errors.Is(m.Err(), locking.ErrLost) {
			t.Errorf("Err = %v, want lost", m.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the set's lease did not end when q was lost")
	}
	_ = m.Release(ctx)
}
