// Command sembench measures baton's semaphores (locking.Client.Semaphore,
// slots that work on a quorum too, and locking.Client.FairSemaphore, first
// come first served on one Redis): contenders over several clients acquire
// a place, hold it briefly and release it, for a fixed time; it reports
// acquisitions per second and the most holders seen at once (never above
// the limit). No Go module served by the module proxy offers a Redis
// semaphore to compare with.
//
//	cd bench && go run ./cmd/sembench        # limit 4, 16 contenders, 5 s
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

func main() {
	limit := flag.Int("limit", 4, "semaphore limit")
	contenders := flag.Int("contenders", 16, "goroutines acquiring")
	clients := flag.Int("clients", 4, "lock clients")
	hold := flag.Duration("hold", time.Millisecond, "how long each holder holds")
	dur := flag.Duration("duration", 5*time.Second, "measurement time")
	flag.Parse()
	fmt.Printf("| semaphore | limit | contenders | clients | hold | acquisitions/s | most holders at once | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, fair := range []bool{false, true} {
		if err := run(fair, *limit, *contenders, *clients, *hold, *dur); err != nil {
			fmt.Fprintln(os.Stderr, "sembench:", err)
			os.Exit(1)
		}
	}
}

func run(fair bool, limit, contenders, nclients int, hold, dur time.Duration) error {
	srv, err := redistest.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	var sems []*locking.Semaphore
	for range nclients {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
		defer rdb.Close()
		c, err := locking.New(rdb, locking.WithFreshDeployment())
		if err != nil {
			return err
		}
		defer c.Close()
		s, err := c.Semaphore("bench", limit)
		if fair {
			s, err = c.FairSemaphore("bench", limit)
		}
		if err != nil {
			return err
		}
		sems = append(sems, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var acquired, failed atomic.Int64
	var holding, most atomic.Int32
	var wg sync.WaitGroup
	for g := range contenders {
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := sems[g%nclients].Acquire(ctx, 5*time.Second, locking.WithAutoExtend(false))
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				n := holding.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(hold) // real time: the work under the slot
				holding.Add(-1)
				_ = l.Release(context.Background())
				acquired.Add(1)
			}
		})
	}
	wg.Wait()
	kind := "Semaphore (slots)"
	if fair {
		kind = "FairSemaphore (FIFO)"
	}
	fmt.Printf("| %s | %d | %d | %d | %v | %.0f | %d | %d |\n", kind, limit, contenders, nclients, hold, float64(acquired.Load())/dur.Seconds(), most.Load(), failed.Load())
	return nil
}
