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
	time.Sleep(hold) // real time: the writer stays in for hold, so a reader let in beside it would be seen
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

// keyOf is the Redis key of lock name (default prefix).
func keyOf(name string) string { return "baton:lock:{" + name + "}" }

// onMajority tells whether at least n members of the sorted set key are
// each on a majority of the masters rdbs: what a quorum client guarantees of
// an entry its call wrote (a master that does not answer within the master
// timeout may lack it until the caller's next attempt).
func onMajority(ctx context.Context, rdbs []*redis.Client, key string, n int) bool {
	on := map[string]int{}
	for _, rdb := range rdbs {
		ms, err := rdb.ZRange(ctx, key, 0, -1).Result()
		if err != nil {
			return false
		}
		for _, m := range ms {
			on[m]++
		}
	}
	got := 0
	for _, k := range on {
		if k > len(rdbs)/2 {
			got++
		}
	}
	return got >= n
}

// serverMs is the server's clock in ms.
func serverMs(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	tm, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// latestLapse is how long (server time) the latest entry of a sorted set
// scored by expiry still lives, or -1 when it is empty.
func latestLapse(t *testing.T, rdb *redis.Client, key string) time.Duration {
	t.Helper()
	zs, err := rdb.ZRangeWithScores(context.Background(), key, -1, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(zs) == 0 {
		return -1
	}
	return time.Duration(int64(zs[0].Score)-serverMs(t, rdb)) * time.Millisecond
}

// Schedule: a reader holds a long share (10s, the ttl a slow report might
// use); a writer with a 1s ttl waits behind it and records its intent; the
// writer's process is killed (no leave); the reader then releases at once.
// Nobody holds anything and no live writer waits: a new reader must get in
// within the dead writer's ttl + 1s (its intent's life once was "the wait it
// was told (the reader's remaining 10s) + its ttl + 1s", ~12s).
func TestRWCrashedWaitingWriterIntentEndsWithItsTTL(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	c := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	m, _ := c.RWMutex("rv-intent")
	r, err := m.TryRLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kill := holder(t, srv, "write rv-intent", false) // ttl holdTTL (1s), waits behind r
	poll.Require(t, 20*time.Second, "the waiting writer's intent", func() bool {
		return rdb.ZCard(ctx, keyOf("rw:rv-intent")+":wi").Val() == 1
	})
	kill()
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	left := latestLapse(t, rdb, keyOf("rw:rv-intent")+":wi")
	bound := holdTTL + time.Second + time.Second // the writer's ttl + 1s, and 1s of slack
	rctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	start := time.Now()
	l, err := m.RLock(rctx, time.Second)
	if err != nil {
		t.Fatalf("the writer (ttl %v) was killed and every reader left, yet a new reader is still refused after %v "+
			"(the dead writer's intent lives %v after the last reader left): %v",
			holdTTL, time.Since(start).Round(time.Millisecond), left.Round(time.Millisecond), err)
	}
	_ = l.Release(ctx)
}

// An extension sent before the share's expiry but arriving after it (the
// request is delayed on the way) does not revive the share: the lease is
// lost, the share is gone from Redis, and a writer gets in. Done fires no
// later than the deadline.
func TestLateShareExtensionDoesNotRevive(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	p := redistest.NewTestProxy(t, srv.Addr())
	c := newClient(t, []*redis.Client{through(t, srv, p)})
	direct := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	m, _ := c.RWMutex("rv-late")
	dm, _ := direct.RWMutex("rv-late")
	r, err := m.TryRLock(ctx, 400*time.Millisecond, locking.WithAutoExtend(false))
	if err != nil {
		t.Fatal(err)
	}
	deadline := r.Deadline()
	done := make(chan time.Time, 1)
	go func() { <-r.Done(); done <- time.Now() }()
	time.Sleep(200 * time.Millisecond) // real time: half the share's 400ms passes on Redis's clock before the late extension
	if err := p.AddLatency(500*time.Millisecond, true); err != nil {
		t.Fatal(err)
	}
	err = r.Extend(ctx, 5*time.Second)
	replied := time.Now() // the reply came back 500ms late
	if err == nil {
		t.Fatal("an extension that reached Redis after the share's expiry succeeded")
	}
	if !errors.Is(err, locking.ErrNotHeld) {
		t.Logf("extension: %v", err)
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	// Done fires at the deadline, not held back by the extension on its
	// way: before its late reply came back (the deadline is 300ms before
	// that reply; how late a busy host runs the timer is no concern here)
	if at := <-done; !at.Before(replied) || at.Before(deadline) {
		t.Errorf("Done fired %v after the validity deadline, %v before the late extension's reply", at.Sub(deadline), replied.Sub(at))
	}
	if rdb.ZScore(ctx, keyOf("rw:rv-late")+":r", r.Token()).Err() != redis.Nil {
		t.Fatal("the lapsed share is in Redis again after a late extension")
	}
	w, err := dm.TryLock(ctx, time.Second)
	if err != nil {
		t.Fatalf("a writer after the share lapsed: %v", err)
	}
	if w.Fence() <= r.Fence() {
		t.Errorf("writer fence %d not above the lapsed reader's %d", w.Fence(), r.Fence())
	}
	_ = w.Release(ctx)
}

// Replies of an auto-extended reader are delayed past the master timeout
// (the extensions run in Redis, their answers come too late): the lease
// ends by its deadline, and no writer gets in before it ended.
func TestReaderDoneBeforeWriterWhenRepliesLag(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	p := redistest.NewTestProxy(t, srv.Addr())
	c := newClient(t, []*redis.Client{through(t, srv, p)}, locking.WithMasterTimeout(100*time.Millisecond))
	direct := newClient(t, []*redis.Client{rdb})
	ctx := testCtx(t)
	m, _ := c.RWMutex("rv-lag")
	dm, _ := direct.RWMutex("rv-lag")
	r, err := m.RLock(ctx, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AddLatency(400*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	var doneAt atomic.Int64
	go func() { <-r.Done(); doneAt.Store(time.Now().UnixNano()) }()
	var w *locking.Lease
	poll.Require(t, 10*time.Second, "a writer after the lagging reader", func() bool {
		l, err := dm.TryLock(ctx, time.Second)
		if err != nil {
			return false
		}
		w = l
		return true
	})
	got := time.Now()
	if d := doneAt.Load(); d == 0 || time.Unix(0, d).After(got) {
		t.Fatalf("a writer got in while the reader's lease had not ended (reader err %v)", r.Err())
	}
	if w.Fence() <= r.Fence() {
		t.Errorf("writer fence %d not above the reader's %d", w.Fence(), r.Fence())
	}
	_ = w.Release(ctx)
	_ = p.Restore()
}

// A steady stream of overlapping readers (each new one arrives before the
// last leaves) does not starve a writer: it gets in about when the readers
// already in have left, on one master and on three.
func TestWriterNotStarvedByReaderStream(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("masters=%d", n), func(t *testing.T) {
			servers := redistest.NewN(t, n)
			c := newClient(t, clientsOf(t, servers...))
			c2 := newClient(t, clientsOf(t, servers...))
			ctx := testCtx(t)
			m, _ := c.RWMutex("rv-stream")
			m2, _ := c2.RWMutex("rv-stream")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var reads atomic.Int32
			for i := range 4 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						l, err := m.RLock(ctx, 2*time.Second)
						if err != nil {
							return
						}
						reads.Add(1)
						time.Sleep(time.Duration(40+10*i) * time.Millisecond) // real time: each reader holds ~50ms; the writer's wait is measured against it
						_ = l.Release(ctx)
					}
				})
			}
			poll.Require(t, 10*time.Second, "readers streaming", func() bool { return reads.Load() > 8 })
			start := time.Now()
			w, err := m2.Lock(ctx, 2*time.Second)
			took := time.Since(start)
			close(stop)
			if err != nil {
				t.Fatal(err)
			}
			if took > time.Second {
				t.Errorf("the writer waited %v behind readers that each hold ~50ms", took)
			}
			_ = w.Release(ctx)
			wg.Wait()
		})
	}
}

// Wake-ups across clients and on a quorum: a writer's release wakes every
// waiting reader of another client; the last reader's release wakes a
// waiting writer of another client; all far below the 20s ttls.
func TestRWWakeupsAcrossClientsOnQuorum(t *testing.T) {
	servers := redistest.NewN(t, 3)
	a := newClient(t, clientsOf(t, servers...))
	b := newClient(t, clientsOf(t, servers...))
	ctx := testCtx(t)
	ma, _ := a.RWMutex("rv-wake")
	mb, _ := b.RWMutex("rv-wake")
	w, err := ma.TryLock(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	readers := make(chan *locking.Lease, 3)
	for range 3 {
		go func() {
			l, err := mb.RLock(ctx, 20*time.Second)
			if err != nil {
				t.Error(err)
			}
			readers <- l
		}()
	}
	// a waiter or an intent is on a majority, the quorum's rule: a master
	// that answered after the master timeout may lack it until the next
	// attempt, which is the wake-up this test waits for
	rdbs := clientsOf(t, servers...)
	poll.Require(t, 10*time.Second, "3 readers registered on a majority", func() bool {
		return onMajority(ctx, rdbs, keyOf("rw:rv-wake")+":w", 3)
	})
	start := time.Now()
	_ = w.Release(ctx)
	var rs []*locking.Lease
	for range 3 {
		select {
		case l := <-readers:
			rs = append(rs, l)
		case <-time.After(5 * time.Second):
			t.Fatal("a reader was not woken by the writer's release")
		}
	}
	t.Logf("readers in %v after the writer's release", time.Since(start))
	got := make(chan *locking.Lease, 1)
	go func() {
		l, err := ma.Lock(ctx, 20*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	poll.Require(t, 10*time.Second, "the writer's intent on a majority", func() bool {
		return onMajority(ctx, rdbs, keyOf("rw:rv-wake")+":wi", 1)
	})
	for _, l := range rs {
		if l != nil {
			_ = l.Release(ctx)
		}
	}
	start = time.Now()
	select {
	case l := <-got:
		t.Logf("writer in %v after the last reader left", time.Since(start))
		if l != nil {
			for _, r := range rs {
				if r != nil && l.Fence() <= r.Fence() {
					t.Errorf("writer fence %d not above reader fence %d", l.Fence(), r.Fence())
				}
			}
			_ = l.Release(ctx)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the writer was not woken by the last reader's release")
	}
}

// Three masters, readers hold; one master restarts empty (a strict client:
// it is quarantined): no writer gets in while the readers hold, their
// extensions keep them on the other two, and once they leave a writer gets
// in with a fence above theirs.
func TestRWQuorumMasterRestartUnderReaders(t *testing.T) {
	servers := redistest.NewN(t, 3)
	deploy(t, servers...)
	// a master timeout well below the ttl: with the harness's 1s, an
	// extension waits for the restarted master past the lease's deadline
	// (see the report)
	c := strict(t, clientsOf(t, servers...), time.Minute, locking.WithMasterTimeout(60*time.Millisecond))
	c2 := strict(t, clientsOf(t, servers...), time.Minute, locking.WithMasterTimeout(60*time.Millisecond))
	ctx := testCtx(t)
	m, _ := c.RWMutex("rv-restart")
	m2, _ := c2.RWMutex("rv-restart")
	var rs []*locking.Lease
	for range 2 {
		r, err := m.RLock(ctx, 600*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(1500 * time.Millisecond) // past two ttls: extensions must carry the readers
	for time.Now().Before(until) {
		if w, err := m2.TryLock(ctx, time.Second); err == nil {
			t.Fatalf("a writer got in beside live readers after a master restart (reader errs %v, %v)", rs[0].Err(), rs[1].Err())
			_ = w.Release(ctx)
		}
		time.Sleep(20 * time.Millisecond) // real time: a writer tries every 20ms while the readers' 600ms shares must be extended past expiry on Redis's clock
	}
	for _, r := range rs {
		if err := r.Err(); err != nil {
			t.Fatalf("a reader was lost with two masters of three up: %v", err)
		}
		_ = r.Release(ctx)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	w, err := m2.Lock(wctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if w.Fence() <= r.Fence() {
			t.Errorf("writer fence %d not above reader fence %d", w.Fence(), r.Fence())
		}
	}
	_ = w.Release(ctx)
}

// A waiting writer whose wait is cancelled, on three masters one of which
// is cut off it at that moment: the intents it can reach go, the readers it
// held back get in on the two masters left, at once.
func TestWriterGivesUpWithMasterCut(t *testing.T) {
	servers := redistest.NewN(t, 3)
	a := newVia(t, servers)
	b := newClient(t, clientsOf(t, servers...))
	ctx := testCtx(t)
	if err := a.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	ma, _ := a.RWMutex("rv-giveup")
	mb, _ := b.RWMutex("rv-giveup")
	r, err := mb.TryRLock(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	wdone := make(chan error, 1)
	go func() {
		_, err := ma.Lock(wctx, 20*time.Second)
		wdone <- err
	}()
	// the intent is on a majority (a master that answered late may lack it):
	// the master cut is one that holds it, so the intent stays there
	rdbs := clientsOf(t, servers...)
	key := keyOf("rw:rv-giveup") + ":wi"
	poll.Require(t, 10*time.Second, "the writer's intent on a majority", func() bool {
		return onMajority(ctx, rdbs, key, 1)
	})
	held := -1
	for i, rdb := range rdbs {
		if rdb.ZCard(ctx, key).Val() > 0 {
			held = i
		}
	}
	cut(t, a.proxies[held])
	cancel()
	<-wdone
	restore(t, a.proxies[held])
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	l, err := mb.RLock(rctx, time.Second)
	if err != nil {
		t.Fatalf("a reader after the writer gave up (its intent left on one master): %v", err)
	}
	_ = l.Release(ctx)
	_ = r.Release(ctx)
}

// One master restarts empty under a reader and under a fair-semaphore
// holder (a strict client: the master is quarantined): nobody gets the
// lock or the place before the holder's lease has ended, and the next
// fence is above the holder's.
func TestSingleMasterRestartUnderShareHolders(t *testing.T) {
	for _, what := range []string{"read", "fairsem"} {
		t.Run(what, func(t *testing.T) {
			s := redistest.New(t)
			deploy(t, s)
			c := strict(t, clientsOf(t, s), time.Second, locking.WithMasterTimeout(100*time.Millisecond))
			c2 := strict(t, clientsOf(t, s), time.Second, locking.WithMasterTimeout(100*time.Millisecond))
			ctx := testCtx(t)
			m, _ := c.RWMutex("rv-rs")
			m2, _ := c2.RWMutex("rv-rs")
			sem, _ := c.FairSemaphore("rv-rs", 1)
			sem2, _ := c2.FairSemaphore("rv-rs", 1)
			var h *locking.Lease
			var err error
			if what == "read" {
				h, err = m.RLock(ctx, 800*time.Millisecond)
			} else {
				h, err = sem.Acquire(ctx, 800*time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			var doneAt atomic.Int64
			go func() { <-h.Done(); doneAt.Store(time.Now().UnixNano()) }()
			if err := s.Restart(); err != nil {
				t.Fatal(err)
			}
			var next *locking.Lease
			poll.Require(t, 10*time.Second, "the next holder after the restart", func() bool {
				var l *locking.Lease
				var err error
				if what == "read" {
					l, err = m2.TryLock(ctx, time.Second)
				} else {
					l, err = sem2.TryAcquire(ctx, time.Second)
				}
				if err != nil {
					return false
				}
				next = l
				return true
			})
			got := time.Now()
			if d := doneAt.Load(); d == 0 || time.Unix(0, d).After(got) {
				t.Fatalf("granted again after the restart while the first lease had not ended (its err %v)", h.Err())
			}
			if next.Fence() <= h.Fence() {
				t.Errorf("fence %d after the restart, not above %d", next.Fence(), h.Fence())
			}
			_ = next.Release(ctx)
		})
	}
}

// Once (a mutex did the same): with a master
// timeout longer than what is left of a lease when it extends (here the
// harness's 1s against a 900ms ttl), one master of three that hangs made
// every extension wait for it past the validity deadline, so the lease was
// lost although two masters confirmed at once. Extend now returns on a
// quorum: the lease must live on.
func TestExtensionDoesNotWaitForHungMinority(t *testing.T) {
	servers := redistest.NewN(t, 3)
	a := newVia(t, servers) // master timeout 1s
	ctx := testCtx(t)
	m, _ := a.RWMutex("rv-hung")
	// extended every second, with 2s left: a margin the test's own load
	// (race-instrumented packages in parallel, a busy core) does not eat,
	// as it ate 600ms of a 900ms lease once
	r, err := m.RLock(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.proxies[0].Blackhole(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond) // real time: past the 3s lease's validity, which only extensions confirmed by Redis keep
	err = r.Err()
	restore(t, a.proxies[0])
	if err != nil {
		t.Fatalf("a reader whose extensions two masters of three confirmed at once was lost: %v (stats %+v)", err, a.Stats())
	}
	_ = r.Release(ctx)
}
