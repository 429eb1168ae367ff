// Package soak holds the soak test: the scheduler and the lock client at
// ten times the benchmarks' load for a bounded time, checked for leaks.
package soak

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.GoleakOptions()...) }

// BATON_SOAK sets how long the load runs (default 10s, which the suite
// runs; `make soak` runs minutes) and BATON_SOAK_JOBS the scheduler's jobs
// (default 300; `make soak` 10,000, ten times the scheduler benchmark's
// 1,000).
const (
	envSoak     = "BATON_SOAK"
	envSoakJobs = "BATON_SOAK_JOBS"
)

// sample is one reading of the process and of Redis.
type sample struct {
	goroutines int
	heap       uint64 // bytes in use after a GC
	keys       int64
}

func read(t *testing.T, rdb *redis.Client) sample {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n, err := rdb.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return sample{runtime.NumGoroutine(), ms.HeapAlloc, n}
}

type counter struct{ n atomic.Int64 }

func (c *counter) Dispatch(context.Context, scheduler.Tick) error { c.n.Add(1); return nil }

// TestSoak runs, for BATON_SOAK: 160 goroutines (ten times the lock
// benchmark's 16) over four lock clients taking mutexes, read shares and
// semaphore places on 1,000 keys; and three scheduler replicas with
// BATON_SOAK_JOBS jobs due every second. Goroutines, heap and Redis keys
// are read every second. Then everything stops: goroutines and heap must
// come back to their baseline, and Redis keys to a bound per job once the
// leases and tick records have expired (a job keeps its fence counter and
// mark; a tick record lives its starting deadline and record margin).
func TestSoak(t *testing.T) {
	d, jobsN := 10*time.Second, 300
	if v := os.Getenv(envSoak); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", envSoak, v)
		}
	}
	if v := os.Getenv(envSoakJobs); v != "" {
		if _, err := fmt.Sscan(v, &jobsN); err != nil || jobsN < 1 {
			t.Fatalf("%s=%q: want a positive number", envSoakJobs, v)
		}
	}
	srv := redistest.New(t)
	probe := srv.TestClient(t)
	base := read(t, probe)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var locks []*locking.Client
	for range 4 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64, ContextTimeoutEnabled: true})
		c, err := locking.New(rdb, locking.WithFreshDeployment(), locking.WithMasterTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, c)
		defer rdb.Close()
	}
	loaders := slices.Clone(locks) // the lock load's clients; the schedulers' join locks
	var ops, failed atomic.Int64
	for g := range 160 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			c := loaders[g%len(loaders)]
			for ctx.Err() == nil {
				key := fmt.Sprintf("k%d", rng.IntN(1000))
				wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
				var l *locking.Lease
				var err error
				switch r := rng.IntN(10); {
				case r < 6:
					l, err = c.Lock(wctx, key, 2*time.Second)
				case r < 7:
					l, err = c.TryLock(wctx, key, 2*time.Second)
				case r < 9:
					m, _ := c.RWMutex(key)
					l, err = m.RLock(wctx, 2*time.Second)
				default:
					s, _ := c.Semaphore(key, 4)
					l, err = s.Acquire(wctx, 2*time.Second)
				}
				wcancel()
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, locking.ErrNotObtained) && !errors.Is(err, locking.ErrUnavailable) {
						failed.Add(1)
					}
					continue
				}
				_ = l.Release(context.Background())
				ops.Add(1)
			}
		})
	}
	var jobs []scheduler.Job
	every, _ := scheduler.ParseSchedule("@every 1s", time.UTC)
	for i := range jobsN {
		jobs = append(jobs, scheduler.Job{Name: fmt.Sprintf("job%05d", i), Schedule: every, StartingDeadline: 2 * time.Second})
	}
	disp := &counter{}
	var scheds []*scheduler.Scheduler
	for i := range 3 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64, ContextTimeoutEnabled: true})
		defer rdb.Close()
		l, err := locking.New(rdb, locking.WithFreshDeployment())
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
		s, err := scheduler.New(l, jobs, disp, scheduler.WithReplica(fmt.Sprintf("r%d", i)), scheduler.WithRecordMargin(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		scheds = append(scheds, s)
		wg.Go(func() { _ = s.Run(ctx) })
	}

	var samples []sample
	start := time.Now()
	for time.Since(start) < d {
		time.Sleep(time.Second) // real time: the load runs
		samples = append(samples, read(t, probe))
	}
	cancel()
	wg.Wait()
	for _, l := range locks {
		_ = l.Close()
	}
	scheds, locks, loaders, jobs = nil, nil, nil, nil // what remains in the heap is what leaked
	// leases (2 s) and waiter entries (ttl + 1 s) expire, and tick records
	// but those inside their retention: a job keeps its mark, its fence
	// counter and the records of its last ticks
	perJob := int64(4)
	bound := base.keys + int64(jobsN)*perJob + 10
	var end sample
	poll.Require(t, 20*time.Second, "Redis keys back to their bound", func() bool {
		end = read(t, probe)
		return end.keys <= bound
	})
	poll.Require(t, 10*time.Second, "goroutines back to the baseline", func() bool {
		end = read(t, probe)
		return end.goroutines <= base.goroutines+2
	})

	peak := sample{}
	for _, s := range samples {
		peak.goroutines, peak.heap, peak.keys = max(peak.goroutines, s.goroutines), max(peak.heap, s.heap), max(peak.keys, s.keys)
	}
	// the heap of the second half of the run does not grow past the first's
	half := len(samples) / 2
	var firstMax, secondMax uint64
	for i, s := range samples {
		if i < half {
			firstMax = max(firstMax, s.heap)
		} else {
			secondMax = max(secondMax, s.heap)
		}
	}
	dispatched := disp.n.Load()
	fmt.Printf("soak: %v, 160 lock goroutines (%d ops, %.0f/s, %d errors), %d jobs on 3 replicas (%d ticks dispatched, %.0f/s)\n",
		d, ops.Load(), float64(ops.Load())/d.Seconds(), failed.Load(), jobsN, dispatched, float64(dispatched)/d.Seconds())
	fmt.Printf("soak: goroutines %d -> peak %d -> %d; heap %.1f -> peak %.1f -> %.1f MiB (first half max %.1f, second %.1f); Redis keys %d -> peak %d -> %d (bound %d: %d a job)\n",
		base.goroutines, peak.goroutines, end.goroutines, mib(base.heap), mib(peak.heap), mib(end.heap), mib(firstMax), mib(secondMax),
		base.keys, peak.keys, end.keys, bound, perJob)
	if len(samples) >= 6 && float64(secondMax) > 1.5*float64(firstMax)+8<<20 {
		t.Errorf("the heap grew from %.1f MiB (first half) to %.1f MiB (second half)", mib(firstMax), mib(secondMax))
	}
	if end.heap > base.heap+16<<20 {
		t.Errorf("heap after the soak %.1f MiB, %.1f MiB before", mib(end.heap), mib(base.heap))
	}
	if failed.Load() > 0 {
		t.Errorf("%d lock operations failed other than busy", failed.Load())
	}
	if dispatched < int64(jobsN)*int64(d/time.Second)/2 {
		t.Errorf("only %d ticks dispatched", dispatched)
	}
	if t.Failed() || testing.Verbose() {
		keys, _ := probe.Keys(context.Background(), "*").Result()
		kinds := map[string]int{}
		for _, k := range keys {
			kinds[strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '#'
				}
				return r
			}, k)]++
		}
		var lines []string
		for k, n := range kinds {
			lines = append(lines, fmt.Sprintf("%6d %s", n, k))
		}
		sort.Strings(lines)
		t.Logf("keys left:\n%s", strings.Join(lines, "\n"))
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }
