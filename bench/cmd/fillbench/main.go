// Command fillbench measures baton's cache fill (locking.Client.Fill) under
// a stampede: N concurrent misses of one key, spread over several clients
// (processes' worth), each round on a fresh key. It reports how many times
// the value was computed per round (1 is the goal) and how long the round
// took until every caller had the value.
//
//	cd bench && go run ./cmd/fillbench                 # 1,000 misses, 5 rounds
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

func main() {
	misses := flag.Int("misses", 1000, "concurrent misses per round")
	clients := flag.Int("clients", 4, "lock clients (each with its own go-redis client)")
	rounds := flag.Int("rounds", 5, "rounds, each on a fresh key")
	compute := flag.Duration("compute", 20*time.Millisecond, "how long one computation takes")
	flag.Parse()
	if err := run(*misses, *clients, *rounds, *compute); err != nil {
		fmt.Fprintln(os.Stderr, "fillbench:", err)
		os.Exit(1)
	}
}

func run(misses, nclients, rounds int, work time.Duration) error {
	srv, err := redistest.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	var locks []*locking.Client
	var caches []*redis.Client
	for range nclients {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 256})
		defer rdb.Close()
		c, err := locking.New(rdb, locking.WithFreshDeployment())
		if err != nil {
			return err
		}
		defer c.Close()
		locks = append(locks, c)
		caches = append(caches, rdb)
	}
	var computes []int64
	var took []time.Duration
	for r := range rounds {
		key := fmt.Sprintf("fillbench:%d:%d", time.Now().UnixNano(), r)
		var n atomic.Int64
		compute := func(context.Context) ([]byte, error) {
			n.Add(1)
			time.Sleep(work) // real time: the computation being protected
			return []byte("value"), nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i := range misses {
			wg.Go(func() {
				if _, err := locks[i%nclients].Fill(ctx, caches[i%nclients], key, time.Minute, compute); err != nil {
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		cancel()
		if f := failed.Load(); f > 0 {
			return fmt.Errorf("round %d: %d of %d Fill calls failed", r, f, misses)
		}
		computes = append(computes, n.Load())
		took = append(took, time.Since(start))
		fmt.Fprintf(os.Stderr, "round %d: %d computes, %v\n", r+1, n.Load(), time.Since(start).Round(time.Millisecond))
	}
	slices.Sort(took)
	fmt.Printf("| misses | clients | rounds | computes per round | round time median (all callers served) |\n|---:|---:|---:|---|---:|\n")
	fmt.Printf("| %d | %d | %d | %v | %v |\n", misses, nclients, rounds, computes, took[len(took)/2].Round(time.Millisecond))
	return nil
}
