// Command heapbench measures what a replica holds in its Go heap per runtime
// schedule: N schedules are put with Cluster.PutSchedule on a redis-server
// it starts, then one replica (scheduler and worker) starts in this process
// and reads them all; the heap in use after a GC, before the replica and
// once it holds every schedule, divided by N.
//
//	cd bench && go run ./cmd/heapbench                  # 20,000 schedules
//	cd bench && go run ./cmd/heapbench -schedules 100000
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/batonhq/baton"
	batonconfig "github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

func main() {
	schedules := flag.Int("schedules", 20000, "runtime schedules to put")
	flag.StringVar(&cpuProfile, "cpuprofile", "", "write the CPU profile of the replica's start (reading and checking every schedule) to `FILE`")
	flag.StringVar(&heapProfile, "heapprofile", "", "write the heap profile, once the replica holds them all, to `FILE` (go tool pprof -sample_index=inuse_space)")
	flag.Parse()
	if heapProfile != "" && *schedules <= 200000 {
		runtime.MemProfileRate = 64 // every object, near enough (beyond, the default sampling)
	}
	if err := run(*schedules); err != nil {
		fmt.Fprintf(os.Stderr, "heapbench: %v\n", err)
		os.Exit(1)
	}
}

// heapProfile and cpuProfile are -heapprofile and -cpuprofile.
var heapProfile, cpuProfile string

func run(n int) error {
	srv, err := redistest.Start()
	if err != nil {
		return err
	}
	defer srv.Close()
	conf, err := batonconfig.Load(fmt.Appendf(nil, "redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: hp\njobs: []\n", srv.Addr()))
	if err != nil {
		return err
	}
	cl, err := baton.NewCluster(conf)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var putErr error
	began := time.Now()
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				if _, err := cl.PutSchedule(ctx, fmt.Sprintf("tenant-%d", i), baton.ScheduleSpec{Schedule: "@every 1h", Handler: "tick", Payload: fmt.Appendf(nil, `{"tenant":%d}`, i)}); err != nil {
					mu.Lock()
					putErr = err
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if putErr != nil {
		return putErr
	}
	fmt.Fprintf(os.Stderr, "put %d schedules in %v; starting a replica\n", n, time.Since(began).Round(time.Millisecond))
	reg := jobs.NewRegistry()
	reg.Register("tick", jobs.HandlerFunc(func(context.Context, jobs.Run) error { return nil }))
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	r, err := baton.New(conf, baton.WithHandlers(reg), baton.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = r.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	began = time.Now()
	for r.Schedules() < n {
		if time.Since(began) > 5*time.Minute {
			return fmt.Errorf("the replica holds %d of %d schedules after 5m", r.Schedules(), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "the replica holds them after %v\n", time.Since(began).Round(time.Millisecond))
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	// the scheduler's start (its catch-up reads every job's mark) outlasts
	// the follower's read: measure once the heap stops shrinking
	var m1 runtime.MemStats
	settled := time.Now()
	for prev := uint64(0); ; prev = m1.HeapInuse {
		time.Sleep(2 * time.Second)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		if prev > 0 && m1.HeapInuse >= prev*99/100 || time.Since(settled) > 3*time.Minute {
			break
		}
	}
	fmt.Fprintf(os.Stderr, "its heap settled %v later\n", time.Since(settled).Round(time.Second))
	fmt.Printf("%d runtime schedules, one replica: heap in use %d -> %d B, %d B per schedule (live objects: %d B per schedule)\n", n, m0.HeapInuse, m1.HeapInuse,
		(int64(m1.HeapInuse)-int64(m0.HeapInuse))/int64(n), (int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/int64(n))
	if heapProfile != "" {
		f, err := os.Create(heapProfile)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
