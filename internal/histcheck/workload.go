package histcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/batonhq/baton/locking"
)

// LockLoad is a lock workload that records into a History: goroutines take
// one of Keys with Lock (each wait bounded by Wait), write to the fencing
// store while they believe they hold it (at the start and at the end of a
// hold of up to Hold), and release. A holder checks its lease before each
// write, as a careful program does; the store refuses stale fences.
type LockLoad struct {
	Clients    []*locking.Client
	Keys       []string
	Goroutines int
	TTL        time.Duration
	Hold       time.Duration // each hold lasts a random time up to this
	Wait       time.Duration // bound of one Lock call
	Seed       uint64
	// Leases, when above 0, ends the load once that many leases were
	// taken (ctx still bounds it): a load bounded by count, not by time,
	// takes as many leases on a starved host as on a quiet one.
	Leases int
}

// Run runs the load until ctx ends (or Leases were taken) and returns the
// number of leases taken.
func (w LockLoad) Run(ctx context.Context, h *History) int {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	store := h.Store()
	var mu sync.Mutex
	taken := 0
	var wg sync.WaitGroup
	for g := range w.Goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(w.Seed, uint64(g)))
			c := w.Clients[g%len(w.Clients)]
			name := fmt.Sprintf("client%d/g%d", g%len(w.Clients), g)
			for ctx.Err() == nil {
				key := w.Keys[rng.IntN(len(w.Keys))]
				if w.hold(ctx, c, name, key, rng, h, store) {
					mu.Lock()
					taken++
					if w.Leases > 0 && taken >= w.Leases {
						stop()
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return taken
}

func (w LockLoad) hold(ctx context.Context, c *locking.Client, name, key string, rng *rand.Rand, h *History, store *Store) bool {
	lctx, cancel := context.WithTimeout(ctx, w.Wait)
	asked := time.Now()
	l, err := c.Lock(lctx, key, w.TTL)
	cancel()
	if err != nil {
		return false
	}
	rec := h.Acquired(name, key, false, l.Fence(), asked, time.Now(), l.Deadline())
	write := func() {
		at := time.Now()
		if l.Err() == nil { // still mine: write, carrying the fence
			store.Write(name, key, l.Fence(), at)
		}
	}
	write()
	t := time.NewTimer(time.Duration(rng.Int64N(int64(w.Hold) + 1)))
	select {
	case <-t.C:
	case <-l.Done():
		t.Stop()
	}
	write()
	if err := l.Err(); err != nil {
		rec.Ended(time.Now(), l.Deadline(), err.Error())
		_ = l.Release(context.Background())
		return true
	}
	rec.Ended(time.Now(), l.Deadline(), "released")
	rctx, rcancel := context.WithTimeout(context.Background(), 2*w.TTL)
	_ = l.Release(rctx)
	rcancel()
	return true
}
