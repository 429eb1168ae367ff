package quorum

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// A master runs one caller's calls in the order they were made, also when
// a waiting caller takes the lead of the queued batch: a release submitted
// after an acquire (a quorum's early return leaves the acquire queued on a
// slow master) must not run first and leave the key taken.
func TestBatchKeepsCallOrder(t *testing.T) {
	s := redistest.New(t)
	rdb := s.TestClient(t)
	g, err := New([]redis.UniversalClient{rdb}, Options{Marker: "m", Quarantine: time.Minute, Fresh: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	if err := g.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	b := g.masters[0].batch
	const key, tok = "lock-x", "token-x"
	acquire := NewScript(`return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', 60000) and 1 or 0`)
	release := NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
	other := NewScript(`return 0`)
	b.mu.Lock()
	b.busy = maxPipelines // as if pipelines were under way: calls queue
	b.mu.Unlock()
	parseInt := func(cmd *redis.Cmd) (any, error) { return cmd.Int64() }
	newFan := func() *fan {
		_, cancel := context.WithCancel(ctx)
		f := &fan{parse: parseInt, ch: make(chan Reply, 1), cancel: cancel}
		f.left.Store(1)
		return f
	}
	acquired, released := newFan(), newFan()
	b.submit(ctx, acquire, acquire.Line([]string{key}, tok), acquired)
	b.submit(ctx, release, release.Line([]string{key}, tok), released)
	waiter := make(chan struct{})
	go func() {
		defer close(waiter)
		b.do(ctx, other, other.Line([]string{"other"}))
	}()
	poll.Require(t, 10*time.Second, "the waiter to queue as the third call", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 3
	})
	b.workInBackground(b.next(nil)) // one pipeline under way returns: the waiter leads
	<-waiter
	if r := <-acquired.ch; r.Err != nil || r.Val != int64(1) {
		t.Fatalf("acquire = %v, %v; want 1", r.Val, r.Err)
	}
	if r := <-released.ch; r.Err != nil || r.Val != int64(1) {
		t.Fatalf("release = %v, %v; want 1 (it ran after the acquire)", r.Val, r.Err)
	}
	if v, _ := rdb.Get(ctx, key).Result(); v != "" {
		t.Fatalf("lock key still held by %q: the release overtook the acquire", v)
	}
	b.mu.Lock()
	b.busy -= maxPipelines - 1 // the pipelines this test pretended were under way
	b.mu.Unlock()
}
