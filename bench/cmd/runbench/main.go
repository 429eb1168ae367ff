// Command runbench measures schedules defined at runtime, all due at the same
// instant: N schedules added while the service runs, on 3 replicas, and what
// happens at the shared instant (dispatch and start lag, duplicates, missed
// ticks). Peers: River's PeriodicJobs on a real PostgreSQL (with the leader
// killed once just before a due instant), asynq's PeriodicTaskManager with 3
// replicas on one redis-server, and baton's runtime schedules. It writes a
// markdown report to stdout and to -out.
//
//	cd bench && go run ./cmd/runbench -quick -peers river,asynq
//	cd bench && go run ./cmd/runbench -schedules 20000 -peers river,asynq
//
// See bench/README.md ("runbench") for what each peer runs with.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// cellConfig is what every peer's cell is given.
type cellConfig struct {
	// schedules is N, the schedules added at runtime (one per customer).
	schedules int
	// replicas is the number of scheduler replicas sharing the N schedules.
	replicas int
	// instants is the number of measured due instants (River adds the kill
	// instant and one instant after it).
	instants int
	// period is the schedules' period, epoch-aligned, so all N are due at
	// the same instant: every multiple of period. asynq's cron has minutes
	// only: its cell always uses 1m.
	period time.Duration
	// settle is the least time between the schedules being registered on
	// every replica and the first measured instant.
	settle time.Duration
	// drain bounds the wait, after the last instant, for every dispatched
	// tick to be started by a worker.
	drain time.Duration
	// kill: kill the leader (River) once just before a due instant.
	kill bool
	// killLead is how long before the due instant the leader is killed.
	killLead time.Duration
	// startLead is the least time baton's cell leaves from its first put
	// to its schedules' first tick (default: one period), for the puts and
	// the replicas' start.
	startLead  time.Duration
	startAfter time.Duration // baton's history.start_after
	// deadline is baton's schedules' starting deadline (0: the default,
	// 1m): an instant larger than the machine dispatches within it
	// records the rest missed.
	deadline time.Duration
	// workers is each replica's worker concurrency.
	workers int
}

// cellResult is what a cell measured; the report renders it.
type cellResult struct {
	system              string // e.g. "River PeriodicJobs"
	runsWith            string // backend and how the schedules are made
	schedules, replicas int
	instants            []instantResult
	// addTook is the time to register the N schedules on every replica.
	addTook time.Duration
	// memory lists memory measurements ("Redis: 312 B per schedule", ...).
	memory []string
	// kill is the leader-kill outcome ("" when no kill was done).
	kill string
	// notes are further facts worth a line under the tables.
	notes []string
}

// instantResult is one due instant of one cell.
type instantResult struct {
	at    time.Time
	label string // "" or e.g. "leader killed 2s before"
	due   int    // ticks due: one per schedule
	// dispatched is the jobs/tasks created for this instant, duplicates
	// included.
	dispatched int
	// started is the ticks that were started by a worker at least once.
	started int
	// duplicates is the ticks started (or, without a start, dispatched)
	// more than once; extra is the surplus runs over all of them.
	duplicates, extra int
	// dispatchErrors is the failed attempts to dispatch (enqueue errors)
	// seen for this instant.
	dispatchErrors int
	// missed is the ticks that never started by the end of the drain.
	missed int
	// lag is due -> first start, one sample per started tick.
	lag []time.Duration
	// dispatchLag is due -> job/task created, one sample per dispatched tick
	// (the first copy).
	dispatchLag []time.Duration
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == riverReplicaArg {
		os.Exit(riverReplicaMain(os.Args[2:]))
	}
	cfg := cellConfig{replicas: 3, workers: 100, kill: true}
	n := flag.Int("schedules", 100000, "schedules added at runtime, all due at the same instant")
	quick := flag.Bool("quick", false, "smoke run: 2000 schedules, one measured instant, 20s period for River and baton (explicit flags win)")
	out := flag.String("out", "results/runtime.md", "where to write the markdown report")
	peers := flag.String("peers", "river,asynq,baton", "systems to run, comma separated: river, asynq, baton, baton-cluster (a 3-primary Redis Cluster), floor (the N tasks written into asynq alone, on an idle Redis)")
	flag.IntVar(&cfg.instants, "instants", 2, "measured due instants per cell (River adds the kill instant and one after it)")
	flag.DurationVar(&cfg.period, "period", time.Minute, "River's and baton's schedule period (epoch-aligned; asynq's cron is always every minute)")
	flag.DurationVar(&cfg.settle, "settle", 5*time.Second, "least time from all schedules registered to the first measured instant")
	flag.DurationVar(&cfg.drain, "drain", 3*time.Minute, "longest wait after the last instant for every dispatched tick to start")
	flag.BoolVar(&cfg.kill, "kill", true, "River: kill the leader once just before a due instant")
	flag.DurationVar(&cfg.killLead, "kill-lead", 2*time.Second, "River: how long before the due instant the leader is killed")
	flag.DurationVar(&cfg.deadline, "starting-deadline", 0, "baton: the schedules' starting_deadline (default: baton's, 1m); an instant the machine cannot dispatch within it records the rest missed")
	flag.DurationVar(&cfg.startLead, "start-lead", 0, "baton: the least time from the first put to the schedules' first tick, for the puts and the replicas' start (default: -period)")
	flag.IntVar(&cfg.workers, "workers", 100, "worker concurrency per replica")
	flag.DurationVar(&cfg.startAfter, "start-after", 0, "baton: history.start_after (default: baton's, 0: every start written as the run starts)")
	timeout := flag.Duration("timeout", 90*time.Minute, "deadline of the whole run")
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["schedules"] {
			*n = 2000
		}
		if !set["instants"] {
			cfg.instants = 1
		}
		if !set["period"] {
			cfg.period = 20 * time.Second
		}
		if !set["drain"] {
			cfg.drain = time.Minute
		}
	}
	cfg.schedules = *n
	var sys []string
	for _, p := range strings.Split(*peers, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains([]string{"river", "asynq", "baton", "baton-cluster", "floor"}, p) {
			fatal(fmt.Errorf("-peers: %q is not one of river, asynq, baton, baton-cluster, floor", p))
		}
		sys = append(sys, p)
	}
	switch {
	case len(sys) == 0:
		fatal(fmt.Errorf("-peers: no system named"))
	case cfg.schedules < 1 || cfg.schedules > 1000000:
		fatal(fmt.Errorf("-schedules: %d is not in 1..1000000", cfg.schedules))
	case cfg.instants < 1 || cfg.instants > 20:
		fatal(fmt.Errorf("-instants: %d is not in 1..20", cfg.instants))
	case cfg.period < time.Second:
		fatal(fmt.Errorf("-period: %v is under 1s", cfg.period))
	case cfg.drain <= 0 || cfg.settle < 0 || cfg.killLead <= 0 || cfg.killLead >= cfg.period:
		fatal(fmt.Errorf("bad flags: -drain > 0, -settle >= 0, 0 < -kill-lead < -period"))
	case cfg.workers < 1 || cfg.workers > 1000:
		fatal(fmt.Errorf("-workers: %d is not in 1..1000", cfg.workers))
	}
	if _, err := cronSpec(cfg.period); err != nil {
		fatal(fmt.Errorf("-period: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	began := time.Now()
	var results []cellResult
	var floor []floorResult
	var pgVersion string
	for _, s := range sys {
		var res cellResult
		var err error
		switch s {
		case "floor":
			if floor, err = runFloor(ctx, cfg.schedules); err != nil {
				fatal(err)
			}
			continue
		case "river":
			res, pgVersion, err = runRiver(ctx, cfg)
		case "asynq":
			res, err = runAsynq(ctx, cfg)
		case "baton":
			res, err = runBaton(ctx, cfg, false)
		case "baton-cluster":
			res, err = runBaton(ctx, cfg, true)
		}
		if err != nil {
			fatal(fmt.Errorf("%s: %w", s, err))
		}
		results = append(results, res)
	}
	logf("all cells done in %v", time.Since(began).Round(time.Second))
	text := render(cfg, results, describeMachine(began, pgVersion)) + renderFloor(floor)
	fmt.Print(text)
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		fatal(err)
	}
	if err := os.WriteFile(*out, []byte(text), 0o644); err != nil {
		fatal(err)
	}
	logf("wrote %s", *out)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "runbench:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

// nextInstant is the first multiple of period (from the Unix epoch) at or
// after t.
func nextInstant(t time.Time, period time.Duration) time.Time {
	s := t.Truncate(period)
	if s.Before(t) {
		s = s.Add(period)
	}
	return s
}

// sleepUntil waits until t or ctx's end.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// schedID is the id of schedule i, the same in every system.
func schedID(i int) string { return fmt.Sprintf("tenant-%06d", i) }

// tickKey identifies one (schedule, due instant).
type tickKey struct {
	id string
	at int64 // unix seconds
}

// rssKiB is the resident set size of a process (/proc/PID/status VmRSS).
func rssKiB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			var kb int64
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb
		}
	}
	return 0
}
