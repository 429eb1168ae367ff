// Command rwbench measures baton's read/write lock (locking.RWMutex): read
// lock pairs (RLock then Release) per second with 16 readers, alone and with
// one writer interleaved (Lock, a 1 ms hold, Release, in a loop), beside the
// same readers taking an exclusive lock instead (baton's mutex, and a
// redsync Mutex, the peer most Go services use). It counts every moment a
// reader and a writer were inside together (there must be none).
//
// No peer read/write lock for Redis is served by the Go module proxy this
// benchmark builds from (the ones found, goRedisson, MaricoHan/redisson,
// egtann/redis-rwlock, go-redislock, are refused), so the exclusive locks
// stand in for "what readers do without one".
//
//	cd bench && go run ./cmd/rwbench        # 16 readers, 5 s per row
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

func main() {
	readers := flag.Int("readers", 16, "reader goroutines")
	clients := flag.Int("clients", 4, "lock clients (processes' worth), readers spread over them")
	dur := flag.Duration("duration", 5*time.Second, "measurement time per row")
	flag.Parse()
	if err := run(*readers, *clients, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "rwbench:", err)
		os.Exit(1)
	}
}

type row struct {
	name           string
	reads, writes  int64
	overlaps, errs int64
	dur            time.Duration
}

func run(readers, nclients int, dur time.Duration) error {
	srv, err := redistest.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	var rdbs []*redis.Client
	var locks []*locking.Client
	for range nclients {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64, ContextTimeoutEnabled: true})
		defer rdb.Close()
		c, err := locking.New(rdb, locking.WithFreshDeployment())
		if err != nil {
			return err
		}
		defer c.Close()
		rdbs = append(rdbs, rdb)
		locks = append(locks, c)
	}
	const ttl = 8 * time.Second
	rw := func(i int) *locking.RWMutex { m, _ := locks[i%nclients].RWMutex("bench"); return m }

	var rows []row
	// 1. readers alone, 2. readers and one writer
	for _, writer := range []bool{false, true} {
		name := "baton RWMutex, readers only"
		if writer {
			name = "baton RWMutex, readers + 1 writer (1 ms hold, 10 ms apart)"
		}
		r := measure(name, readers, dur, writer,
			func(g int, ctx context.Context) (func(), error) {
				l, err := rw(g).RLock(ctx, ttl, locking.WithAutoExtend(false))
				if err != nil {
					return nil, err
				}
				return func() { _ = l.Release(context.Background()) }, nil
			},
			func(ctx context.Context) (func(), error) {
				l, err := rw(0).Lock(ctx, ttl, locking.WithAutoExtend(false))
				if err != nil {
					return nil, err
				}
				return func() { _ = l.Release(context.Background()) }, nil
			})
		rows = append(rows, r)
	}
	// 3. the same readers on baton's exclusive lock
	rows = append(rows, measure("baton Lock (exclusive), same readers", readers, dur, false,
		func(g int, ctx context.Context) (func(), error) {
			l, err := locks[g%nclients].Lock(ctx, "bench-mutex", ttl, locking.WithAutoExtend(false))
			if err != nil {
				return nil, err
			}
			return func() { _ = l.Release(context.Background()) }, nil
		}, nil))
	// 4. ... and on a redsync Mutex (its defaults: 32 tries, 50-250 ms apart)
	var rss []*redsync.Redsync
	for _, rdb := range rdbs {
		rss = append(rss, redsync.New(goredis.NewPool(rdb)))
	}
	rows = append(rows, measure("redsync Mutex (exclusive), same readers", readers, dur, false,
		func(g int, ctx context.Context) (func(), error) {
			m := rss[g%nclients].NewMutex("bench-redsync", redsync.WithExpiry(ttl))
			if err := m.LockContext(ctx); err != nil {
				return nil, err
			}
			return func() { _, _ = m.Unlock() }, nil
		}, nil))

	fmt.Printf("| lock | readers | read pairs/s | writes/s | reader-writer overlaps | errors |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		w := "-"
		if r.writes > 0 {
			w = fmt.Sprintf("%.0f", float64(r.writes)/r.dur.Seconds())
		}
		fmt.Printf("| %s | %d | %.0f | %s | %d | %d |\n", r.name, readers, float64(r.reads)/r.dur.Seconds(), w, r.overlaps, r.errs)
	}
	return nil
}

// measure runs readers read loops (and a write loop) for dur.
func measure(name string, readers int, dur time.Duration, writer bool, read func(int, context.Context) (func(), error), write func(context.Context) (func(), error)) row {
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var reads, writes, overlaps, errs atomic.Int64
	var inR, inW atomic.Int32
	var wg sync.WaitGroup
	for g := range readers {
		wg.Go(func() {
			for ctx.Err() == nil {
				release, err := read(g, ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				inR.Add(1)
				if inW.Load() != 0 {
					overlaps.Add(1)
				}
				inR.Add(-1)
				release()
				reads.Add(1)
			}
		})
	}
	if writer {
		wg.Go(func() {
			for ctx.Err() == nil {
				release, err := write(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				inW.Add(1)
				if inR.Load() != 0 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond) // real time: the write
				inW.Add(-1)
				release()
				writes.Add(1)
				select { // the writer's pause between writes
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	return row{name: name, reads: reads.Load(), writes: writes.Load(), overlaps: overlaps.Load(), errs: errs.Load(), dur: dur}
}
