package locking_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
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

// Schedule: a fair semaphore of 1 place is held with a 10s ttl; a waiter
// with a 1s ttl queues at its head; the waiter's process is killed (no
// leave); the holder releases at once. The place is free and no live caller
// waits: the next caller must get in within the dead head's ttl + 1s (its
// place once lived "the wait it was told + ttl + 1s", ~12s).
func TestFairSemaphoreCrashedHeadFreesThePlaceWithItsTTL(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	s, _ := c.FairSemaphore("rv-head", 1)
	h, err := s.TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kill := holder(t, srv, "fairsem rv-head 1", false) // ttl holdTTL (1s), queues behind h
	registered(t, rdb, "fsem:rv-head", 1)
	kill()
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	d, _ := rdb.HGetAll(ctx, keyOf("fsem:rv-head")+":qd").Result()
	now := serverMs(t, rdb)
	bound := holdTTL + time.Second + time.Second
	actx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := time.Now()
	l, err := s.Acquire(actx, time.Second)
	if err != nil {
		t.Fatalf("the only place is free and its dead head (ttl %v) was killed, yet Acquire is refused after %v "+
			"(queue data %v at server ms %d): %v", holdTTL, time.Since(start).Round(time.Millisecond), d, now, err)
	}
	_ = l.Release(ctx)
}

// Schedule: a slot semaphore of 2 is full (slots #0 and #1 held for 10s);
// a caller waits in Acquire (ttl 5s) and so sits on one random slot's
// waiter set; the holder of the OTHER slot releases. A place is free: the
// waiter must be woken by it (it once slept until its wait on its own slot
// timed out, its ttl).
func TestSlotSemaphoreWaiterWokenByOtherSlot(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	s, _ := c.Semaphore("rv-slots", 2)
	held := map[string]*locking.Lease{}
	for range 2 {
		l, err := s.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held[l.Key()] = l
	}
	got := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	go func() {
		l, err := s.Acquire(wctx, 5*time.Second)
		if err == nil {
			_ = l.Release(ctx)
		}
		got <- err
	}()
	var waitedOn string
	poll.Require(t, 10*time.Second, "the waiter on a slot", func() bool {
		for i := range 2 {
			k := fmt.Sprintf("sem:rv-slots#%d", i)
			if rdb.ZCard(ctx, keyOf(k)+":w").Val() == 1 {
				waitedOn = k
				return true
			}
		}
		return false
	})
	for k, l := range held {
		if k != waitedOn {
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	start := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("a slot was released %v ago but the waiter (on %s) was never woken: %v", time.Since(start).Round(time.Millisecond), waitedOn, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("waiter got the freed slot only %v after its release", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter never returned")
	}
	for k, l := range held {
		if k == waitedOn {
			_ = l.Release(ctx)
		}
	}
}

// A fair semaphore of 2 on one master whose replies are lost now and then
// (the script ran, the answer died with the connection): never more than 2
// valid holders, and fences strictly grow in grant order.
func TestFairSemaphoreLostRepliesKeepLimit(t *testing.T) {
	srv := redistest.New(t)
	p := redistest.NewTestProxy(t, srv.Addr())
	var clients []*locking.Client
	for range 2 {
		clients = append(clients, newClient(t, []*redis.Client{through(t, srv, p)}, locking.WithMasterTimeout(200*time.Millisecond)))
	}
	const limit = 2
	var mu sync.Mutex
	live := map[*locking.Lease]bool{}
	var fences []int64
	var grants atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { proxyChaos(t, 3, []*redistest.Proxy{p}, stop) })
	deadline := time.Now().Add(3 * time.Second)
	for w := range 6 {
		wg.Go(func() {
			s, _ := clients[w%2].FairSemaphore("rv-fair-lost", limit)
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				l, err := s.Acquire(ctx, 500*time.Millisecond)
				cancel()
				if err != nil {
					continue
				}
				grants.Add(1)
				mu.Lock()
				if l.Err() == nil {
					n := 1
					for o := range live {
						if o.Err() == nil {
							n++
						}
					}
					if n > limit {
						t.Errorf("%d valid holders of a fair semaphore of %d", n, limit)
					}
					live[l] = true
					fences = append(fences, l.Fence())
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond) // real time: a holder stays in a moment, so one over the limit would be seen
				mu.Lock()
				delete(live, l)
				mu.Unlock()
				rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
				_ = l.Release(rctx)
				rcancel()
			}
		})
	}
	time.Sleep(time.Until(deadline)) // real time: the load runs against the masters' clocks
	close(stop)
	wg.Wait()
	seen := map[int64]bool{}
	for _, f := range fences {
		if seen[f] {
			t.Errorf("fence %d handed to two holders", f)
		}
		seen[f] = true
	}
	t.Logf("%d grants", grants.Load())
}

// A fair semaphore of 2 with six queued waiters and a caller hammering
// TryAcquire: places go in queue order, TryAcquire never takes one while
// waiters queue, and never more than 2 hold.
func TestFairSemaphoreFIFOUnderBarging(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	c2 := newClient(t, []*redis.Client{srv.TestClient(t)})
	ctx := testCtx(t)
	s, _ := c.FairSemaphore("rv-fifo", 2)
	s2, _ := c2.FairSemaphore("rv-fifo", 2)
	var holding atomic.Int32
	first := make([]*locking.Lease, 2)
	for i := range first {
		l, err := s.TryAcquire(ctx, 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		first[i] = l
	}
	holding.Store(2)
	// the order of the grants, by their fences (a grant's fence is above
	// every earlier one's): with two places, two waiters granted one
	// after the other both hold at once, and return from Acquire in
	// whatever order the Go scheduler wakes them
	type grant struct {
		waiter int
		fence  int64
	}
	var grants []grant
	var mu sync.Mutex
	var wg sync.WaitGroup
	const n = 6
	for i := range n {
		sem := s
		if i%2 == 1 {
			sem = s2
		}
		wg.Go(func() {
			l, err := sem.Acquire(ctx, 20*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			if h := holding.Add(1); h > 2 {
				t.Errorf("%d holders", h)
			}
			mu.Lock()
			grants = append(grants, grant{i, l.Fence()})
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // real time: a holder stays in a moment, so a third holder would be seen
			holding.Add(-1)
			_ = l.Release(ctx)
		})
		registered(t, rdb, "fsem:rv-fifo", int64(i+1))
	}
	stop := make(chan struct{})
	var barges atomic.Int32
	var hw sync.WaitGroup
	hw.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			l, err := s2.TryAcquire(ctx, time.Second)
			if err == nil {
				if rdb.LLen(ctx, keyOf("fsem:rv-fifo")+":q").Val() > 0 {
					barges.Add(1)
				}
				_ = l.Release(ctx)
			}
		}
	})
	holding.Add(-2)
	for _, l := range first {
		_ = l.Release(ctx)
	}
	wg.Wait()
	close(stop)
	hw.Wait()
	slices.SortFunc(grants, func(a, b grant) int { return cmp.Compare(a.fence, b.fence) })
	order := make([]int, len(grants))
	for i, g := range grants {
		order[i] = g.waiter
	}
	for i, who := range order {
		if who != i {
			t.Fatalf("served in order %v, want 0..%d", order, n-1)
		}
	}
	if b := barges.Load(); b > 0 {
		t.Errorf("TryAcquire took a place %d times while waiters queued", b)
	}
}
