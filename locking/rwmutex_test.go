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

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// occupancy records who is inside a read/write critical section and fails
// the test when a writer shares it with anyone.
type occupancy struct {
	t                 *testing.T
	readers, writers  atomic.Int32
	mostReaders, hits atomic.Int32
}

func (o *occupancy) read(hold time.Duration) {
	n := o.readers.Add(1)
	if w := o.writers.Load(); w != 0 {
		o.t.Errorf("a reader entered while %d writers were in", w)
	}
	for m := o.mostReaders.Load(); n > m && !o.mostReaders.CompareAndSwap(m, n); m = o.mostReaders.Load() {
	}
	time.Sleep(hold) // real time: a short hold the others overlap
	o.readers.Add(-1)
	o.hits.Add(1)
}

func (o *occupancy) write(hold time.Duration) {
	if w := o.writers.Add(1); w != 1 {
		o.t.Errorf("%d writers in at once", w)
	}
	if r := o.readers.Load(); r != 0 {
		o.t.Errorf("a writer entered while %d readers were in", r)
	}
	time.Sleep(hold) // real time
	o.writers.Add(-1)
	o.hits.Add(1)
}

// 16 goroutines over two clients, 12 readers and 4 writers: readers never
// overlap a writer, writers never overlap each other, readers do overlap
// each other, on one master and on a quorum of three.
func TestRWMutexReadersNeverOverlapAWriter(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("masters=%d", n), func(t *testing.T) {
			var servers []*redistest.Server
			for range n {
				servers = append(servers, redistest.New(t))
			}
			clients := []*locking.Client{newClient(t, clientsOf(t, servers...)), newClient(t, clientsOf(t, servers...))}
			ctx := testCtx(t)
			o := &occupancy{t: t}
			var wg sync.WaitGroup
			for g := range 16 {
				wg.Go(func() {
					m, err := clients[g%2].RWMutex("ledger")
					if err != nil {
						t.Error(err)
						return
					}
					for range 6 {
						var l *locking.Lease
						if g%4 == 0 {
							if l, err = m.Lock(ctx, 5*time.Second); err == nil {
								o.write(2 * time.Millisecond)
							}
						} else if l, err = m.RLock(ctx, 5*time.Second); err == nil {
							o.read(4 * time.Millisecond)
						}
						if err != nil {
							t.Error(err)
							return
						}
						if err := l.Release(ctx); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			if o.hits.Load() != 96 {
				t.Errorf("%d critical sections, want 96", o.hits.Load())
			}
			if o.mostReaders.Load() < 2 {
				t.Errorf("readers never overlapped (at most %d at once)", o.mostReaders.Load())
			}
		})
	}
}

// Write-preferring: once a writer waits, a new reader is refused (TryRLock)
// or waits behind it (RLock) although only readers hold the lock; when the
// readers leave, the writer is woken and gets in first, then the readers.
func TestRWMutexWaitingWriterKeepsNewReadersOut(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	m, err := c.RWMutex("config")
	if err != nil {
		t.Fatal(err)
	}
	r1, err := m.TryRLock(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m.TryRLock(ctx, 20*time.Second)
	if err != nil {
		t.Fatalf("a second reader beside the first: %v", err)
	}
	if r2.Fence() <= r1.Fence() {
		t.Errorf("fences %d then %d, want increasing", r1.Fence(), r2.Fence())
	}
	if _, err := m.TryLock(ctx, time.Second); !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("TryLock under readers = %v, want not obtained", err)
	}
	// TryLock records no intent: readers still get in
	if l, err := m.TryRLock(ctx, time.Second); err != nil {
		t.Fatalf("TryRLock after a failed TryLock: %v", err)
	} else {
		_ = l.Release(ctx)
	}

	order := make(chan string, 4)
	var wg sync.WaitGroup
	var w *locking.Lease
	wg.Go(func() {
		var err error
		if w, err = m.Lock(ctx, 20*time.Second); err != nil {
			t.Error(err)
			return
		}
		order <- "writer"
	})
	poll.Require(t, 10*time.Second, "the writer's intent", func() bool {
		return rdb.ZCard(ctx, "baton:lock:{rw:config}:wi").Val() == 1
	})
	if _, err := m.TryRLock(ctx, time.Second); !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("TryRLock while a writer waits = %v, want not obtained", err)
	}
	wg.Go(func() {
		l, err := m.RLock(ctx, 20*time.Second)
		if err != nil {
			t.Error(err)
			return
		}
		order <- "reader"
		_ = l.Release(ctx)
	})
	registered(t, rdb, "rw:config", 2)
	start := time.Now()
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	if first := <-order; first != "writer" {
		t.Fatalf("%s got in first after the readers left, want the writer", first)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Errorf("the writer got in %v after the last reader left: not woken by the release", waited)
	}
	if w.Fence() <= r2.Fence() {
		t.Errorf("writer's fence %d not above the readers' %d", w.Fence(), r2.Fence())
	}
	_ = w.Release(ctx)
	if got := <-order; got != "reader" {
		t.Fatalf("then %s, want the waiting reader", got)
	}
	wg.Wait()
}

// Every waiting reader is woken by a writer's release, not only one.
func TestRWMutexWriterReleaseWakesEveryReader(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	m, _ := c.RWMutex("doc")
	w, err := m.TryLock(ctx, 25*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *locking.Lease, 3)
	for range 3 {
		go func() {
			l, err := m.RLock(ctx, 20*time.Second)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
	}
	registered(t, rdb, "rw:doc", 3)
	_ = w.Release(ctx)
	timeout := time.After(15 * time.Second) // far below the writer's 25s ttl
	for range 3 {
		select {
		case l := <-got:
			if l != nil {
				defer func() { _ = l.Release(ctx) }()
			}
		case <-timeout:
			t.Fatal("a waiting reader was not woken by the writer's release")
		}
	}
}

// A reader's share is its own entry with its own expiry: a reader that
// stopped extending (crashed) frees its share at its ttl while another
// reader's share lives on; an expired share is never revived by a late
// extension, and its release says it was lost.
func TestRWMutexEachReaderExpiresOnItsOwn(t *testing.T) {
	srv := redistest.New(t)
	c := newClient(t, []*redis.Client{srv.TestClient(t)})
	ctx := testCtx(t)
	m, _ := c.RWMutex("cache")
	short, err := m.TryRLock(ctx, 300*time.Millisecond, locking.WithAutoExtend(false)) // it lapses
	if err != nil {
		t.Fatal(err)
	}
	long, err := m.RLock(ctx, 600*time.Millisecond) // auto-extended
	if err != nil {
		t.Fatal(err)
	}
	waitDone(t, short, 5*time.Second)
	if err := short.Extend(ctx, time.Second); !errors.Is(err, locking.ErrNotHeld) {
		t.Errorf("extending a lapsed read share = %v, want not held", err)
	}
	if err := short.Release(ctx); !errors.Is(err, locking.ErrLost) {
		t.Errorf("releasing a lapsed read share = %v, want lost", err)
	}
	if _, err := m.TryLock(ctx, time.Second); !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("TryLock with the extended reader still in = %v, want not obtained", err)
	}
	if err := long.Err(); err != nil {
		t.Fatalf("the auto-extended reader ended: %v", err)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatal(err)
	}
	w, err := m.TryLock(ctx, time.Second)
	if err != nil {
		t.Fatalf("TryLock after both readers left: %v", err)
	}
	_ = w.Release(ctx)
	if _, err := c.RWMutex(""); !errors.Is(err, locking.ErrInvalid) {
		t.Errorf("empty name: %v", err)
	}
	if _, err := m.RLock(ctx, time.Second, locking.WithFair()); !errors.Is(err, locking.ErrInvalid) {
		t.Errorf("WithFair on a read/write lock: %v", err)
	}
}

// A writer that gives up waiting takes its intent along and wakes the
// readers it held back.
func TestRWMutexWriterGivingUpLetsReadersIn(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	m, _ := c.RWMutex("report")
	r, err := m.TryRLock(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() {
		_, err := m.Lock(wctx, 20*time.Second)
		wdone <- err
	}()
	poll.Require(t, 10*time.Second, "the writer's intent", func() bool {
		return rdb.ZCard(ctx, "baton:lock:{rw:report}:wi").Val() == 1
	})
	rdone := make(chan error, 1)
	go func() {
		l, err := m.RLock(ctx, 20*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		rdone <- err
	}()
	registered(t, rdb, "rw:report", 2)
	cancel()
	if err := <-wdone; !errors.Is(err, locking.ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled writer: %v", err)
	}
	select {
	case err := <-rdone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second): // the intent would lapse only after ~21s
		t.Fatal("the reader held back by the writer was not let in when it gave up")
	}
	if n := rdb.ZCard(ctx, "baton:lock:{rw:report}:wi").Val(); n != 0 {
		t.Errorf("%d intents left behind", n)
	}
	_ = r.Release(ctx)
}
