package locking_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/histcheck"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// Deterministic fault schedules from the adversarial review of the fault
// machinery: they make the rare events of the random schedules happen
// every time.

// A schedule that makes a lease end while another client waits for the
// key, every time: the holder's path to its master is blackholed (1) right
// after it acquired, (2) after one extension, (3) after one extension whose
// reply came 80 ms late. The waiter gets the key once it expired in Redis;
// the holder must have stopped believing by then. Passes on the code as it
// is; catches a lock that believes a lease longer than its key lives, at
// acquisition or extension, including a deadline measured from the reply
// instead of the send (mutations the random schedules catch seldom or
// never).
func TestScheduleHolderCutOffWhileOthersWait(t *testing.T) {
	const ttl = 400 * time.Millisecond
	srv := redistest.New(t)
	p := redistest.NewTestProxy(t, srv.Addr())
	a := newClient(t, []*redis.Client{through(t, srv, p)}, locking.WithMasterTimeout(100*time.Millisecond))
	b := newClient(t, []*redis.Client{srv.TestClient(t)})
	h := histcheck.New()
	store := h.Store()
	for _, round := range []struct {
		name    string
		latency time.Duration // on the holder's reply path
		before  time.Duration // held before the blackhole
	}{
		{"cut at once", 0, 0},
		{"cut after an extension", 0, ttl/3 + 80*time.Millisecond},
		{"cut after a late-answered extension", 80 * time.Millisecond, ttl/3 + 160*time.Millisecond},
	} {
		key := round.name
		if round.latency > 0 {
			if err := p.AddLatency(round.latency, false); err != nil {
				t.Fatal(err)
			}
		}
		asked := time.Now()
		l, err := a.Lock(testCtx(t), key, ttl)
		if err != nil {
			t.Fatal(err)
		}
		ra := h.Acquired("holder", key, false, l.Fence(), asked, time.Now(), l.Deadline())
		var wg sync.WaitGroup
		wg.Go(func() { // the holder writes while it believes it holds the key
			for {
				at := time.Now()
				if l.Err() != nil {
					ra.Ended(time.Now(), l.Deadline(), l.Err().Error())
					return
				}
				store.Write("holder", key, l.Fence(), at)
				time.Sleep(2 * time.Millisecond)
			}
		})
		wg.Go(func() { // the waiter
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			asked := time.Now()
			lb, err := b.Lock(ctx, key, ttl, locking.WithAutoExtend(false))
			if err != nil {
				t.Error(err)
				return
			}
			rb := h.Acquired("waiter", key, false, lb.Fence(), asked, time.Now(), lb.Deadline())
			store.Write("waiter", key, lb.Fence(), time.Now())
			time.Sleep(20 * time.Millisecond)
			rb.Ended(time.Now(), lb.Deadline(), "released")
			_ = lb.Release(context.Background())
		})
		time.Sleep(round.before)
		if err := p.Blackhole(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err := p.Restore(); err != nil {
			t.Fatal(err)
		}
		_ = l.Release(context.Background())
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", h.Counts())
}

// G4 across snapshot reloads: TestScheduleMasterRestarts reloads one
// master at a time from a stale snapshot, so a majority always carries the
// current fencing counter and the fence floor (the counter lifted to the
// marker's floor after a restart) is never needed: removing it passes that
// schedule. Here a majority (2 of 3) is reloaded, twice, from snapshots
// taken at once, while the load runs. Passes on the code as it is; fails
// ("fence order") when the floor is dropped.
func TestScheduleMajorityFromStaleSnapshots(t *testing.T) {
	const ttl, q = 300 * time.Millisecond, 700 * time.Millisecond
	servers := redistest.NewN(t, 3)
	deploy(t, servers...)
	clients := []*locking.Client{strict(t, clientsOf(t, servers...), q), strict(t, clientsOf(t, servers...), q)}
	checked(t, 5*time.Second, clients, ttl, func(ctx context.Context) {
		all := func(f func(s *redistest.Server) error) {
			var wg sync.WaitGroup
			for _, s := range servers[:2] {
				wg.Go(func() {
					if err := f(s); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
		}
		for range 2 {
			sleepCtx(ctx, 400*time.Millisecond)
			all((*redistest.Server).Save)                // the two snapshots as close together as can be
			sleepCtx(ctx, 900*time.Millisecond)          // grants after them: lost by the reload
			all((*redistest.Server).RestartFromSnapshot) // a majority reloaded
			sleepCtx(ctx, q)                             // their quarantine
		}
	})
}
