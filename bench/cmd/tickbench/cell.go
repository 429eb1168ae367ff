package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton"
	batonconfig "github.com/batonhq/baton/config"
	"github.com/batonhq/baton/jobs"
)

// perTick is a cell's cost per tick, idle subtracted, all servers summed.
type perTick struct {
	calls, scripts, cpuUsec float64
	reads                   float64 // reads from clients (INFO stats), about one per round trip
}

type result struct {
	cell            string
	masters         int
	ticks           int64
	servers         []*server
	f               float64 // busy window / idle window
	perTick         perTick
	idleCPUmsPerSec float64
}

func (r result) topology() string {
	if r.cell == "asynq" {
		return "—"
	}
	if r.masters == 0 {
		return "the queue Redis"
	}
	return fmt.Sprintf("%d apart", r.masters)
}

// a running system under measurement; stop ends it and waits.
type system struct {
	stop func()
}

// runCell measures the idle twin, then the busy cell, on fresh servers.
func runCell(ctx context.Context, cfg config, cell string, masters int) (result, error) {
	res := result{cell: cell, masters: masters, f: 1}
	servers, err := startServers(masters)
	if err != nil {
		return res, err
	}
	defer closeServers(servers)
	res.servers = servers

	var ran atomic.Int64
	start := func(ns string, due int) (system, error) {
		if cell == "asynq" {
			return startAsynq(ctx, cfg, servers[0].srv.Addr(), due, &ran)
		}
		return startBaton(ctx, cfg, cell, servers, ns, due, &ran)
	}

	logf("  idle: %v warm-up, %v measured", cfg.warm, cfg.window)
	sys, err := start("tbidle", 0)
	if err != nil {
		return res, fmt.Errorf("idle: %w", err)
	}
	if err := sleep(ctx, cfg.warm); err != nil {
		sys.stop()
		return res, err
	}
	idle, err := measure(ctx, servers, cfg.window)
	sys.stop()
	if err != nil {
		return res, err
	}
	for i, s := range servers {
		s.idle = idle[i]
	}

	if m := os.Getenv("TICKBENCH_MONITOR"); m != "" {
		logf("  queue Redis at %s", servers[0].srv.Addr())
		_ = os.WriteFile(m, []byte(servers[0].srv.Addr()), 0o644)
	}
	logf("  busy: %d due every second, %v warm-up, %v measured", cfg.jobs, cfg.warm, cfg.window)
	sys, err = start("tb", cfg.jobs)
	if err != nil {
		return res, fmt.Errorf("busy: %w", err)
	}
	defer sys.stop()
	if err := sleep(ctx, cfg.warm); err != nil {
		return res, err
	}
	ran0 := ran.Load()
	busy, err := measure(ctx, servers, cfg.window)
	if err != nil {
		return res, err
	}
	res.ticks = ran.Load() - ran0
	var idleCPU time.Duration
	for i, s := range servers {
		s.busy = busy[i]
		n := s.net(res.f)
		res.perTick.calls += float64(n.total())
		res.perTick.scripts += float64(n.scripts())
		res.perTick.cpuUsec += float64(n.cpu.Microseconds())
		res.perTick.reads += float64(n.reads)
		idleCPU += s.idle.cpu
	}
	if res.ticks > 0 {
		res.perTick.calls /= float64(res.ticks)
		res.perTick.scripts /= float64(res.ticks)
		res.perTick.cpuUsec /= float64(res.ticks)
		res.perTick.reads /= float64(res.ticks)
	}
	res.idleCPUmsPerSec = float64(idleCPU.Microseconds()) / 1000 / cfg.window.Seconds()
	logf("  %d ticks: %.1f calls, %.2f scripts, %.1f round trips, %.0f µs Redis CPU per tick", res.ticks, res.perTick.calls, res.perTick.scripts, res.perTick.reads, res.perTick.cpuUsec)
	return res, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// startBaton runs cfg.replicas replicas (scheduler and worker) in this
// process with due jobs (job-list cells) or runtime schedules
// (runtime-* cells), each "@every 1s" with a no-op Go handler.
func startBaton(ctx context.Context, cfg config, cell string, servers []*server, ns string, due int, ran *atomic.Int64) (system, error) {
	conc := batonconfig.ConcurrencyForbid
	if strings.HasSuffix(cell, "-allow") {
		conc = batonconfig.ConcurrencyAllow
	}
	var y strings.Builder
	fmt.Fprintf(&y, "redis: {url: \"redis://%s/0\"}\n", servers[0].srv.Addr())
	y.WriteString("locking: {fresh_deployment: true")
	if len(servers) > 1 {
		y.WriteString(", masters: [")
		for i, s := range servers[1:] {
			if i > 0 {
				y.WriteString(", ")
			}
			fmt.Fprintf(&y, "\"redis://%s/0\"", s.srv.Addr())
		}
		y.WriteString("]")
	}
	y.WriteString("}\n")
	fmt.Fprintf(&y, "namespace: %s\nworker: {concurrency: %d}\n", ns, cfg.workers)
	if cfg.history >= 0 {
		fmt.Fprintf(&y, "history: {runs: %d}\n", cfg.history)
	}
	if strings.HasPrefix(cell, "list-") && due > 0 {
		y.WriteString("jobs:\n")
		for i := range due {
			fmt.Fprintf(&y, "  - {name: j%d, schedule: \"@every 1s\", concurrency: %s, handler: {name: tick}}\n", i, conc)
		}
	} else {
		y.WriteString("jobs: []\n")
	}
	conf, err := batonconfig.Load([]byte(y.String()))
	if err != nil {
		return system{}, err
	}
	if strings.HasPrefix(cell, "runtime-") && due > 0 {
		cl, err := baton.NewCluster(conf)
		if err != nil {
			return system{}, err
		}
		for i := range due {
			if _, err := cl.PutSchedule(ctx, fmt.Sprintf("tenant-%d", i), baton.ScheduleSpec{Schedule: "@every 1s", Handler: "tick", Concurrency: conc}); err != nil {
				cl.Close()
				return system{}, err
			}
		}
		cl.Close()
	}
	reg := jobs.NewRegistry()
	reg.Register("tick", jobs.HandlerFunc(func(context.Context, jobs.Run) error {
		ran.Add(1)
		return nil
	}))
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for i := range cfg.replicas {
		r, err := baton.New(conf, baton.WithHandlers(reg), baton.WithReplicaID(fmt.Sprintf("r%d", i)), baton.WithLogger(quiet))
		if err != nil {
			cancel()
			wg.Wait()
			return system{}, err
		}
		wg.Go(func() {
			if err := r.Run(rctx); err != nil {
				logf("baton replica r%d: %v", i, err)
			}
		})
	}
	return system{stop: func() { cancel(); wg.Wait() }}, nil
}

// startAsynq is the baseline: cfg.replicas asynq servers (concurrency
// cfg.workers, the queue polled every 100ms as baton's worker polls it) with
// a no-op handler, and a client that enqueues due tasks at every second,
// each with a TaskID and a Retention, as baton enqueues a tick.
func startAsynq(ctx context.Context, cfg config, addr string, due int, ran *atomic.Int64) (system, error) {
	opt := asynq.RedisClientOpt{Addr: addr}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var servers []*asynq.Server
	for range cfg.replicas {
		srv := asynq.NewServer(opt, asynq.Config{Concurrency: cfg.workers, TaskCheckInterval: 100 * time.Millisecond, LogLevel: asynq.ErrorLevel})
		mux := asynq.NewServeMux()
		mux.HandleFunc("tick", func(context.Context, *asynq.Task) error {
			ran.Add(1)
			return nil
		})
		if err := srv.Start(mux); err != nil {
			cancel()
			for _, s := range servers {
				s.Shutdown()
			}
			return system{}, err
		}
		servers = append(servers, srv)
	}
	client := asynq.NewClient(opt)
	var wg sync.WaitGroup
	if due > 0 {
		wg.Go(func() {
			for {
				now := time.Now()
				next := now.Truncate(time.Second).Add(time.Second)
				select {
				case <-rctx.Done():
					return
				case <-time.After(next.Sub(now)):
				}
				for i := range due {
					task := asynq.NewTask("tick", []byte(fmt.Sprintf(`{"job":"j%d","tick":%d}`, i, next.Unix())))
					_, err := client.EnqueueContext(rctx, task, asynq.TaskID(fmt.Sprintf("j%d@%d", i, next.Unix())), asynq.Retention(2*time.Minute))
					if err != nil && rctx.Err() == nil {
						logf("asynq enqueue: %v", err)
					}
				}
			}
		})
	}
	return system{stop: func() {
		cancel()
		wg.Wait()
		_ = client.Close()
		for _, s := range servers {
			s.Shutdown()
		}
	}}, nil
}
