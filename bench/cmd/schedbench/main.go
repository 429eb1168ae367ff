// Command schedbench measures baton's scheduler end to end (claim, dispatch
// into asynq, run by a no-op asynq worker) and, in the same run, gocron v2
// with a redsync-backed distributed locker and asynq's own Scheduler, all on
// one real redis-server it starts itself. It writes a markdown report (tables
// plus a machine description) to stdout and to -out.
//
//	cd bench && go run ./cmd/schedbench            # full run, about 4-6 minutes
//	cd bench && go run ./cmd/schedbench -quick     # smoke run
//
// Every job is "@every 1s" (epoch-aligned), so all jobs are due at the same
// instant every second. See bench/README.md for what each cell measures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/bench/internal/redisinfo"
	"github.com/batonhq/baton/internal/redistest"
)

// config is the command line.
type config struct {
	ticks      int
	jobs       []int
	replicas   []int
	gocronJobs []int
	asynqTasks int
	warm       time.Duration
	drain      time.Duration
	workerConc int
	checkEvery time.Duration
	workerNice int
	out        string
	args       []string
	skipGocron bool
	noWorker   bool
	diagJobs   []int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == workerArg {
		os.Exit(workerMain(os.Args[2:]))
	}
	cfg := config{}
	jobs := flag.String("jobs", "100,1000,10000", "baton cells: job counts")
	reps := flag.String("replicas", "1,3", "baton cells: scheduler replica counts")
	gjobs := flag.String("gocron-jobs", "100,1000,10000", "gocron cells: job counts (3 gocron schedulers each)")
	flag.IntVar(&cfg.ticks, "ticks", 5, "measured ticks (seconds) per cell, after the warm-up")
	flag.IntVar(&cfg.asynqTasks, "asynq-tasks", 100, "asynq Scheduler cell: tasks registered on each of 3 replicas (0 skips the cell)")
	flag.DurationVar(&cfg.warm, "warm", 7*time.Second, "baton cells: warm-up before the first measured tick (covers the start-up claims retried after the 5s tick lease)")
	flag.DurationVar(&cfg.drain, "drain", 60*time.Second, "longest wait for the worker to run the measured ticks after the schedulers stop")
	flag.IntVar(&cfg.workerConc, "worker-concurrency", 64, "asynq worker Concurrency")
	flag.DurationVar(&cfg.checkEvery, "task-check-interval", 20*time.Millisecond, "asynq worker TaskCheckInterval")
	flag.IntVar(&cfg.workerNice, "worker-nice", 10, "nice value of the worker process (0: none)")
	flag.BoolVar(&cfg.skipGocron, "no-gocron", false, "skip the gocron cells")
	flag.BoolVar(&cfg.noWorker, "no-worker", false, "run the baton cells without the asynq worker (no start lag, no run counts)")
	diag := flag.String("diag-jobs", "10000", "extra baton cells without the worker, to separate scheduler from worker load: job counts (empty: none)")
	cpuprof := flag.String("cpuprofile", "", "write a CPU profile of this process (not the worker, not redis) to this file")
	quick := flag.Bool("quick", false, "smoke run: jobs 100,1000, gocron 100, diag 1000, 2 ticks, 2.5s warm-up (explicit flags win)")
	flag.StringVar(&cfg.out, "out", "results/scheduler.md", "where to write the markdown report")
	flag.Parse()
	if *quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["jobs"] {
			*jobs = "100,1000"
		}
		if !set["gocron-jobs"] {
			*gjobs = "100"
		}
		if !set["diag-jobs"] {
			*diag = "1000"
		}
		if !set["warm"] {
			cfg.warm = 2500 * time.Millisecond
		}
		if !set["ticks"] {
			cfg.ticks = 2
		}
		if !set["drain"] {
			cfg.drain = 20 * time.Second
		}
	}
	var err error
	if cfg.jobs, err = intList(*jobs); err != nil {
		fatal(fmt.Errorf("-jobs: %w", err))
	}
	if cfg.replicas, err = intList(*reps); err != nil {
		fatal(fmt.Errorf("-replicas: %w", err))
	}
	if cfg.diagJobs, err = intList(*diag); err != nil {
		fatal(fmt.Errorf("-diag-jobs: %w", err))
	}
	if cfg.gocronJobs, err = intList(*gjobs); err != nil {
		fatal(fmt.Errorf("-gocron-jobs: %w", err))
	}
	if cfg.ticks < 1 || cfg.ticks > 60 || cfg.warm < 0 || cfg.drain <= 0 || cfg.workerConc < 1 || cfg.checkEvery <= 0 || cfg.asynqTasks < 0 {
		fatal(fmt.Errorf("bad flags: -ticks 1..60, -warm >= 0, -drain > 0, -worker-concurrency >= 1, -task-check-interval > 0, -asynq-tasks >= 0"))
	}
	cfg.args = os.Args[1:]
	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		}()
	}
	if err := run(cfg); err != nil {
		pprof.StopCPUProfile()
		fatal(err)
	}
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 100000 {
			return nil, fmt.Errorf("%q is not a count in 1..100000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "schedbench:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// env is what every cell shares: the redis-server and an uninstrumented
// admin client (FLUSHALL, INFO).
type env struct {
	cfg      config
	addr     string
	redisPID int
	admin    *redis.Client
}

func run(cfg config) error {
	redis.SetLogger(quietRedis{})
	srv, err := redistest.Start()
	if err != nil {
		return err
	}
	defer func() { _ = srv.Close() }()
	e := &env{cfg: cfg, addr: srv.Addr()}
	e.admin = redis.NewClient(&redis.Options{Addr: e.addr, ContextTimeoutEnabled: true})
	defer func() { _ = e.admin.Close() }()
	if e.redisPID, err = redisinfo.PID(e.admin); err != nil {
		return err
	}
	logf("redis-server %s (pid %d)", e.addr, e.redisPID)

	began := time.Now()
	rep := &report{cfg: cfg}
	for _, j := range cfg.jobs {
		for _, r := range cfg.replicas {
			res, err := e.batonCell(j, r, !cfg.noWorker)
			if err != nil {
				return fmt.Errorf("baton J=%d R=%d: %w", j, r, err)
			}
			rep.baton = append(rep.baton, res)
		}
	}
	if !cfg.noWorker {
		for _, j := range cfg.diagJobs {
			for _, r := range cfg.replicas {
				res, err := e.batonCell(j, r, false)
				if err != nil {
					return fmt.Errorf("baton J=%d R=%d without worker: %w", j, r, err)
				}
				rep.baton = append(rep.baton, res)
			}
		}
	}
	if !cfg.skipGocron {
		for _, j := range cfg.gocronJobs {
			for _, v := range []gocronVariant{{"redsync defaults", false}, {"redsync WithTries(1)", true}} {
				res, err := e.gocronCell(j, v)
				if err != nil {
					return fmt.Errorf("gocron J=%d %s: %w", j, v.name, err)
				}
				rep.gocron = append(rep.gocron, res)
			}
		}
	}
	if cfg.asynqTasks > 0 {
		res, err := e.asynqSchedCell(cfg.asynqTasks, 3)
		if err != nil {
			return fmt.Errorf("asynq scheduler: %w", err)
		}
		rep.asynq = append(rep.asynq, res)
	}
	logf("all cells done in %v", time.Since(began).Round(time.Second))

	text := rep.render(describeMachine(cfg, began))
	fmt.Print(text)
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.out, []byte(text), 0o644); err != nil {
		return err
	}
	logf("wrote %s", cfg.out)
	return nil
}

// fresh empties the server between cells, so no cell sees another's keys,
// tasks, marks or memberships.
func (e *env) fresh() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return e.admin.FlushAll(ctx).Err()
}

// sleepUntil sleeps until t (no-op if t is past).
func sleepUntil(t time.Time) {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
}

// nextSecond is the first whole second at or after t.
func nextSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}
