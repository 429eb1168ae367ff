package locking_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// 100 concurrent misses, spread over three clients (three processes'
// worth), compute the value once; every caller gets it.
func TestFillComputesOnce(t *testing.T) {
	srv := redistest.New(t)
	ctx := testCtx(t)
	var computed atomic.Int64
	compute := func(ctx context.Context) ([]byte, error) {
		computed.Add(1)
		time.Sleep(50 * time.Millisecond) // real time: a slow computation the others wait out
		return []byte("value"), nil
	}
	var clients []*locking.Client
	var caches []*redis.Client
	for range 3 {
		rdb := srv.TestClient(t)
		clients = append(clients, newClient(t, []*redis.Client{rdb}, locking.WithFreshDeployment()))
		caches = append(caches, rdb)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Go(func() {
			v, err := clients[i%3].Fill(ctx, caches[i%3], "report:today", time.Minute, compute)
			if err == nil && string(v) != "value" {
				err = fmt.Errorf("got %q", v)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := computed.Load(); n != 1 {
		t.Errorf("computed %d times, want once", n)
	}
}

// An error is returned and not cached: the next caller computes.
func TestFillDoesNotCacheErrors(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb}, locking.WithFreshDeployment())
	ctx := testCtx(t)
	boom := errors.New("upstream down")
	if _, err := c.Fill(ctx, rdb, "k", time.Minute, func(context.Context) ([]byte, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Fill = %v, want the computation's error", err)
	}
	if n, _ := rdb.Exists(ctx, "k").Result(); n != 0 {
		t.Fatal("an error was cached")
	}
	v, err := c.Fill(ctx, rdb, "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("ok"), nil })
	if err != nil || string(v) != "ok" {
		t.Fatalf("second Fill = %q, %v", v, err)
	}
	if ttl := rdb.PTTL(ctx, "k").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("cached with ttl %v, want up to 1m", ttl)
	}
}

// A computer that crashed (its lock never released, not extended) keeps the
// others waiting until the lock's ttl, then one of them computes.
func TestFillAfterACrashedComputer(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb}, locking.WithFreshDeployment())
	ctx := testCtx(t)
	if _, err := c.TryLock(ctx, "fill:k", 500*time.Millisecond, locking.WithAutoExtend(false)); err != nil { // the crashed computer's lock
		t.Fatal(err)
	}
	start := time.Now()
	v, err := c.Fill(ctx, rdb, "k", time.Minute, func(context.Context) ([]byte, error) { return []byte("late"), nil })
	if err != nil || string(v) != "late" {
		t.Fatalf("Fill = %q, %v", v, err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("computed after %v, while the crashed computer's lock still held", waited)
	}
}
