// Command idlebench measures what baton costs while nothing is due, and the
// start lag that cost buys: three replicas (scheduler + baton's own worker,
// at the default settings unless -poll says otherwise) in this process, on
// one redis-server it starts, with 1, 10 and 100 jobs whose ticks do not
// come due during the window (idle), then one job ticking every second
// (start lag: due instant -> the handler starts).
//
//	cd bench && go run ./cmd/idlebench                 # default poll 100ms, and 1s beside it
//	go run ./cmd/idlebench -window 20s -out results/idle.md
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/bench/internal/cpu"
	"github.com/batonhq/baton/bench/internal/redisinfo"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

func main() {
	window := flag.Duration("window", 10*time.Second, "idle measurement window per cell")
	ticks := flag.Int("ticks", 10, "ticks measured for the start lag")
	polls := flag.String("poll", "100ms,1s", "worker.poll_interval values, comma-separated (100ms is the default)")
	out := flag.String("out", "results/idle.md", "where to write the report too")
	flag.Parse()
	if err := run(*window, *ticks, *polls, *out); err != nil {
		fmt.Fprintln(os.Stderr, "idlebench:", err)
		os.Exit(1)
	}
}

type cell struct {
	jobs                   int
	poll                   time.Duration
	cmdsPerSec             float64
	cpuPerReplica          float64 // % of one core
	redisCPU               float64 // % of one core
	lagP50, lagP99, lagMax time.Duration
}

func run(window time.Duration, ticks int, polls, out string) error {
	srv, err := redistest.Start()
	if err != nil {
		return err
	}
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	var cells []cell
	for _, p := range strings.Split(polls, ",") {
		poll, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return fmt.Errorf("-poll %q: %w", p, err)
		}
		for _, n := range []int{1, 10, 100} {
			fmt.Fprintf(os.Stderr, "%s idle: %d jobs, poll %s, 3 replicas, %s window\n", time.Now().Format("15:04:05.000"), n, poll, window)
			c, err := idle(rdb, srv, n, poll, window)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "  start lag (one @every 1s job, %d ticks)\n", ticks)
			c.lagP50, c.lagP99, c.lagMax, err = startLag(rdb, srv, n, poll, ticks)
			if err != nil {
				return err
			}
			cells = append(cells, c)
		}
	}
	fmt.Fprintf(os.Stderr, "%s sizing: 100 jobs @every 1s, 3 replicas, 12 ticks\n", time.Now().Format("15:04:05.000"))
	sz, err := sizing(rdb, srv, 100, 12)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s commands per job-tick with and without history: 100 jobs @every 1s, 3 replicas, 8 ticks each\n", time.Now().Format("15:04:05.000"))
	withH, err := cmdsPerJobTick(rdb, srv, 100, 8, true)
	if err != nil {
		return err
	}
	withoutH, err := cmdsPerJobTick(rdb, srv, 100, 8, false)
	if err != nil {
		return err
	}
	report := render(cells, window, ticks) + sz + fmt.Sprintf("\n## What the run history costs\n\nRedis commands per job-tick on the server (all clients: 3 replicas' schedulers and baton's own workers running a no-op handler, Lua-internal commands included), 100 jobs `@every 1s`, 8 ticks: with history (history.runs 100) %.1f, without (history.runs 0) %.1f: the history adds %.1f per job-tick (ratio %.2f). Top-level calls: the worker's two history scripts per run (started, finished); the scheduler's path writes none.\n",
		withH, withoutH, withH-withoutH, withH/withoutH)
	fmt.Print(report)
	if out != "" {
		return os.WriteFile(out, []byte(report), 0o644)
	}
	return nil
}

// cfgFor is a job list of n handler jobs of schedule spec, plus extra.
func cfgFor(srv *redistest.Server, ns string, n int, spec string, poll time.Duration, extra string) (*config.Config, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: %s\nworker: {shutdown_grace: 2s, poll_interval: %s}\njobs:\n", srv.Addr(), ns, poll)
	for i := range n {
		fmt.Fprintf(&b, "  - name: j%d\n    schedule: %q\n    handler: {name: noop}\n", i, spec)
	}
	b.WriteString(extra)
	return config.Load([]byte(b.String()))
}

// replicas runs three replicas of cfg until stop is called.
func replicas(cfg *config.Config, reg *jobs.Registry) (stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 3 {
		r, err := baton.New(cfg, baton.WithHandlers(reg), baton.WithReplicaID(fmt.Sprintf("idle-%d", i)))
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		wg.Go(func() { _ = r.Run(ctx) })
	}
	return func() { cancel(); wg.Wait() }, nil
}

func idle(rdb *redis.Client, srv *redistest.Server, n int, poll, window time.Duration) (cell, error) {
	// yearly ticks: nothing comes due in the window
	cfg, err := cfgFor(srv, fmt.Sprintf("idle%d-%d", n, poll.Milliseconds()), n, "0 0 1 1 *", poll, "")
	if err != nil {
		return cell{}, err
	}
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("noop", func(context.Context, jobs.Run) error { return nil }); err != nil {
		return cell{}, err
	}
	stop, err := replicas(cfg, reg)
	if err != nil {
		return cell{}, err
	}
	defer stop()
	time.Sleep(3 * time.Second) // real time: start-up (catch-up, first heartbeats) is not idle
	pid, _ := redisinfo.PID(rdb)
	c0, s0, r0, t0 := calls(rdb), cpu.Self(), cpu.Of(pid), time.Now()
	time.Sleep(window)
	c1, s1, r1, t1 := calls(rdb), cpu.Self(), cpu.Of(pid), time.Now()
	el := t1.Sub(t0).Seconds()
	return cell{jobs: n, poll: poll,
		cmdsPerSec:    float64(c1-c0-1) / el, // our own INFO between the reads
		cpuPerReplica: 100 * (s1 - s0).Seconds() / el / 3,
		redisCPU:      100 * (r1 - r0).Seconds() / el}, nil
}

func startLag(rdb *redis.Client, srv *redistest.Server, n int, poll time.Duration, ticks int) (p50, p99, maxLag time.Duration, err error) {
	cfg, err := cfgFor(srv, fmt.Sprintf("lag%d-%d", n, poll.Milliseconds()), n, "0 0 1 1 *", poll,
		"  - name: beat\n    schedule: \"@every 1s\"\n    handler: {name: beat}\n")
	if err != nil {
		return 0, 0, 0, err
	}
	lags := make(chan time.Duration, 1000)
	reg := jobs.NewRegistry()
	_ = reg.HandleFunc("noop", func(context.Context, jobs.Run) error { return nil })
	if err := reg.HandleFunc("beat", func(_ context.Context, run jobs.Run) error {
		lags <- time.Since(run.Tick)
		return nil
	}); err != nil {
		return 0, 0, 0, err
	}
	stop, err := replicas(cfg, reg)
	if err != nil {
		return 0, 0, 0, err
	}
	defer stop()
	var got []time.Duration
	deadline := time.After(time.Duration(ticks+10) * time.Second)
	for len(got) < ticks+2 {
		select {
		case l := <-lags:
			got = append(got, l)
		case <-deadline:
			return 0, 0, 0, fmt.Errorf("start lag: %d of %d ticks ran", len(got), ticks+2)
		}
	}
	got = got[2:] // the first ticks meet a starting process
	slices.Sort(got)
	return got[len(got)/2], got[len(got)*99/100], got[len(got)-1], nil
}

// sizing runs n jobs ticking every second on an empty namespace for ticks
// seconds and reports the Redis keys and memory they hold, and what a full
// history adds.
func sizing(rdb *redis.Client, srv *redistest.Server, n, ticks int) (string, error) {
	ctx := context.Background()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		return "", err
	}
	keys0 := rdb.DBSize(ctx).Val()
	mem0 := usedMemory(rdb)
	cfg, err := cfgFor(srv, "size", n, "@every 1s", 100*time.Millisecond, "")
	if err != nil {
		return "", err
	}
	reg := jobs.NewRegistry()
	_ = reg.HandleFunc("noop", func(context.Context, jobs.Run) error { return nil })
	stop, err := replicas(cfg, reg)
	if err != nil {
		return "", err
	}
	time.Sleep(time.Duration(ticks)*time.Second + 500*time.Millisecond) // real time: ticks come every second
	keys1, mem1 := rdb.DBSize(ctx).Val(), usedMemory(rdb)
	hkey := "size:{history:j0}"
	entries := rdb.XLen(ctx, hkey).Val()
	hbytes, _ := rdb.MemoryUsage(ctx, hkey, 0).Result()
	stop()
	perEntry := 0.0
	if entries > 0 {
		perEntry = float64(hbytes) / float64(entries)
	}
	full := perEntry * float64(cfg.History.Runs*2) // started + finished per run
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Sizing Redis\n\n%d jobs `@every 1s` on three replicas for %d s, from an empty Redis. A tick's record and its retained asynq task live for the job's retention (about 67 s at the defaults), so a job holds the ticks of one retention span: after %d s that is %d ticks each; scale the per-tick part by the ticks your jobs have within their retention.\n\n", n, ticks, ticks, ticks)
	b.WriteString("| keys per job | memory per job | history: bytes per event | history at its cap (history.runs 100, 2 events a run) |\n| ---: | ---: | ---: | ---: |\n")
	fmt.Fprintf(&b, "| %.1f | %.1f KiB | %.0f | %.1f KiB |\n", float64(keys1-keys0)/float64(n), float64(mem1-mem0)/float64(n)/1024, perEntry, full/1024)
	b.WriteString("\nKeys: per tick within the retention a record and asynq's retained task; per job its mark, fence counter and history stream; per queue asynq's own keys. Memory grows with the ticks inside the retention and up to the history's cap, not with time.\n")
	return b.String(), nil
}

// cmdsPerJobTick runs n jobs ticking every second for ticks seconds, with or
// without history, and returns the server's commands per job-tick.
func cmdsPerJobTick(rdb *redis.Client, srv *redistest.Server, n, ticks int, history bool) (float64, error) {
	ns := "cmds-nohist"
	if history {
		ns = "cmds-hist"
	}
	cfg, err := cfgFor(srv, ns, n, "@every 1s", 100*time.Millisecond, "")
	if err != nil {
		return 0, err
	}
	if !history {
		cfg.History.Runs = 0
	}
	reg := jobs.NewRegistry()
	_ = reg.HandleFunc("noop", func(context.Context, jobs.Run) error { return nil })
	stop, err := replicas(cfg, reg)
	if err != nil {
		return 0, err
	}
	defer stop()
	time.Sleep(3 * time.Second) // real time: past start-up
	c0 := calls(rdb)
	time.Sleep(time.Duration(ticks) * time.Second) // real time: ticks come every second
	return float64(calls(rdb)-c0-1) / float64(n*ticks), nil
}

func usedMemory(rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func render(cells []cell, window time.Duration, ticks int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# baton at rest: Redis commands and CPU of 3 idle replicas, and the start lag it buys\n\n")
	fmt.Fprintf(&b, "Machine: %d CPUs (`nproc`), %s; one redis-server (no persistence) on loopback; three replicas (scheduler + baton's own worker, `baton.New` + `Run`) in one process. ", numCPU(), goVersion())
	fmt.Fprintf(&b, "Idle: every job's schedule is yearly, so nothing is due in the %s window; commands = `INFO commandstats` calls per second on the server (all clients: claims loops, membership and roster heartbeats, skew checks, the asynq servers' polling, heartbeats and recoverers; Lua-internal commands included). CPU = this process's CPU time / wall time / 3, %% of one core. ", window)
	fmt.Fprintf(&b, "Start lag = a tick's due instant → the handler starts, one extra job `@every 1s`, %d ticks after 2 of warm-up. Generated by `cd bench && go run ./cmd/idlebench`.\n\n", ticks)
	b.WriteString("| jobs | worker.poll_interval | Redis commands/s (3 replicas) | per replica | CPU per replica | redis-server CPU | start lag p50 / p99 / max ms |\n")
	b.WriteString("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %.1f%% | %.1f%% | %.0f / %.0f / %.0f |\n", c.jobs, c.poll, c.cmdsPerSec, c.cmdsPerSec/3,
			c.cpuPerReplica, c.redisCPU, ms(c.lagP50), ms(c.lagP99), ms(c.lagMax))
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// calls is the server's command count (INFO commandstats, all commands).
func calls(rdb *redis.Client) int64 {
	stats, _ := redisinfo.CommandStats(rdb)
	var total int64
	for _, n := range stats {
		total += n
	}
	return total
}

func numCPU() int { return runtime.NumCPU() }

func goVersion() string { return runtime.Version() }
