package locking

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
)

// A master runs one caller's calls in the order they were made, also when
// a waiting caller takes the lead of the queued batch: a release submitted
// after an acquire (a quorum's early return leaves the acquire queued on a
// slow master) must not run first and leave the key taken.
func TestBatchKeepsCallOrder(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	c, err := New([]redis.UniversalClient{rdb})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b := c.masters[0].batch
	k := c.keysFor("x")
	const tok = "token-x"
	b.mu.Lock()
	b.busy = maxPipelines // as if pipelines were under way: calls queue
	b.mu.Unlock()
	fan := func(parse func(*redis.Cmd) (any, error)) *fan {
		_, cancel := context.WithCancel(ctx)
		f := &fan{parse: parse, ch: make(chan reply, 1), cancel: cancel}
		f.left.Store(1)
		return f
	}
	acquired, released := fan(parseAcquire), fan(parseInt)
	b.submit(ctx, c.scripts.acquire, c.scripts.acquire.line([]string{k.lock, k.fence}, tok, int64(60000), "s"), acquired)
	b.submit(ctx, c.scripts.release, c.scripts.release.line([]string{k.lock, k.fence}, tok, c.wakeArg, k.name), released)
	waiter := make(chan struct{})
	go func() {
		defer close(waiter)
		b.do(ctx, c.scripts.leave, c.scripts.leave.line([]string{"other"}, "w"))
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		b.mu.Lock()
		n := len(b.queue)
		b.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls queued, want 3", n)
		}
		time.Sleep(time.Millisecond) // the waiter queues on its own goroutine
	}
	b.handOff(b.next(nil)) // one pipeline under way returns: the waiter leads
	<-waiter
	if r := <-acquired.ch; r.err != nil {
		t.Fatalf("acquire: %v", r.err)
	}
	if r := <-released.ch; r.err != nil || r.val != int64(1) {
		t.Fatalf("release = %v, %v; want 1 (it ran after the acquire)", r.val, r.err)
	}
	if v, _ := rdb.Get(ctx, k.lock).Result(); v != "" {
		t.Fatalf("lock key still held by %q: the release overtook the acquire", v)
	}
	b.mu.Lock()
	b.busy -= maxPipelines - 1 // the pipelines this test pretended were under way
	b.mu.Unlock()
}
