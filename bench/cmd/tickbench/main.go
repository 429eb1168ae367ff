// Command tickbench measures what one tick costs Redis: calls, script calls
// and Redis CPU per tick, read from INFO commandstats and INFO cpu of every
// redis-server involved before and after a steady-state window, with the
// idle cost of the same set-up (the same replicas, nothing due) subtracted.
// Bare asynq (enqueue with TaskID and Retention, a no-op handler) runs in
// the same run as the baseline.
//
//	cd bench && go run ./cmd/tickbench                 # every cell, about 6 minutes
//	cd bench && go run ./cmd/tickbench -quick          # smoke run
//	cd bench && go run ./cmd/tickbench -cells asynq,list-forbid
//
// Cells: asynq; list-forbid, list-allow (job-list jobs with a Go handler);
// runtime-forbid, runtime-allow (runtime schedules put with
// Cluster.PutSchedule); each baton cell on one Redis (queue and lock master)
// and, with -masters 3 (the default), again with three lock masters apart
// from the queue Redis. See bench/README.md.
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

	"github.com/batonhq/baton/bench/internal/machine"
	"github.com/batonhq/baton/bench/internal/mdtable"
)

type config struct {
	jobs     int
	replicas int
	workers  int
	window   time.Duration
	warm     time.Duration
	masters  int
	history  int
	cells    []string
	out      string
}

var allCells = []string{"asynq", "list-forbid", "list-allow", "runtime-forbid", "runtime-allow"}

func main() {
	cfg := config{}
	flag.IntVar(&cfg.jobs, "jobs", 200, "jobs (or schedules, or asynq tasks) due every second (enough that a tick's cost stands well above the idle cost subtracted)")
	flag.IntVar(&cfg.replicas, "replicas", 3, "baton replicas (scheduler and worker) and asynq servers")
	flag.IntVar(&cfg.workers, "workers", 10, "worker concurrency of each replica and asynq server")
	flag.DurationVar(&cfg.window, "window", 10*time.Second, "measured window of each cell, and of its idle twin")
	flag.DurationVar(&cfg.warm, "warm", 8*time.Second, "warm-up before the measured window (covers the start-up claims)")
	flag.IntVar(&cfg.masters, "masters", 3, "second topology: lock masters apart from the queue Redis (0: one Redis only)")
	flag.IntVar(&cfg.history, "history", -1, "baton's history.runs (-1: the default); 0 shows what the run history costs")
	cells := flag.String("cells", strings.Join(allCells, ","), "cells to run")
	quick := flag.Bool("quick", false, "smoke run: 5s windows, 4s warm-up (explicit flags win)")
	flag.StringVar(&cfg.out, "out", "results/tick.md", "where to write the markdown report")
	flag.Parse()
	if *quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["window"] {
			cfg.window = 5 * time.Second
		}
		if !set["warm"] {
			cfg.warm = 4 * time.Second
		}
	}
	for _, c := range strings.Split(*cells, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !slices.Contains(allCells, c) {
			fmt.Fprintf(os.Stderr, "tickbench: -cells: unknown cell %q (known: %s)\n", c, strings.Join(allCells, ", "))
			os.Exit(2)
		}
		cfg.cells = append(cfg.cells, c)
	}
	began := time.Now()
	ctx := context.Background()
	var results []result
	for _, c := range cfg.cells {
		topologies := []int{0}
		if c != "asynq" && cfg.masters > 0 {
			topologies = append(topologies, cfg.masters)
		}
		for _, m := range topologies {
			logf("cell %s, masters apart: %d", c, m)
			r, err := runCell(ctx, cfg, c, m)
			if err != nil {
				fmt.Fprintf(os.Stderr, "tickbench: cell %s (masters %d): %v\n", c, m, err)
				os.Exit(1)
			}
			results = append(results, r)
		}
	}
	report := render(cfg, results, began)
	fmt.Print(report)
	if cfg.out != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err == nil {
			if err := os.WriteFile(cfg.out, []byte(report), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "tickbench: %v\n", err)
			}
		}
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

// render is the markdown report: the per-tick table, then each cell's
// commands per tick by Redis.
func render(cfg config, results []result, began time.Time) string {
	var b strings.Builder
	b.WriteString("# Redis cost of a tick\n\n")
	fmt.Fprintf(&b, "%d jobs due every second, %d replicas (scheduler and worker) or asynq servers with concurrency %d, %v measured after %v of warm-up; the same set-up with nothing due measured for as long and subtracted. Calls count the commands scripts run (Redis 7 commandstats); scripts are EVALSHA and EVAL; round trips are the reads from clients (INFO stats total_reads_processed: a command or a pipeline read at once is one, a pipeline too big for one read is more); CPU is the redis-server processes' user+sys time (INFO cpu), all Redis servers of the cell summed.\n\n",
		cfg.jobs, cfg.replicas, cfg.workers, cfg.window, cfg.warm)
	base := -1
	for i, r := range results {
		if r.cell == "asynq" {
			base = i
		}
	}
	t := mdtable.Table{Header: []string{"cell", "lock masters", "ticks", "calls / tick", "scripts / tick", "round trips / tick", "Redis CPU µs / tick", "idle CPU ms/s", "calls x asynq", "CPU x asynq"}}
	for _, r := range results {
		cx, ux := "", ""
		if base >= 0 && results[base].perTick.calls > 0 {
			cx = fmt.Sprintf("%.2f", r.perTick.calls/results[base].perTick.calls)
			ux = fmt.Sprintf("%.2f", r.perTick.cpuUsec/results[base].perTick.cpuUsec)
		}
		t.Add(r.cell, r.topology(), fmt.Sprint(r.ticks), fmt.Sprintf("%.1f", r.perTick.calls), fmt.Sprintf("%.2f", r.perTick.scripts),
			fmt.Sprintf("%.1f", r.perTick.reads), fmt.Sprintf("%.0f", r.perTick.cpuUsec), fmt.Sprintf("%.1f", r.idleCPUmsPerSec), cx, ux)
	}
	b.WriteString(t.String())
	b.WriteString("\n## Commands per tick, by cell and Redis\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "### %s, %s\n\n", r.cell, r.topology())
		for _, s := range r.servers {
			fmt.Fprintf(&b, "- %s: %s\n", s.role, s.perTickCommands(r.ticks, r.f))
		}
		b.WriteString("\n")
	}
	b.WriteString("## Machine\n\n")
	for _, l := range machine.Describe(began, redisVersion(), []string{"github.com/hibiken/asynq"}, "tickbench", os.Args[1:]) {
		b.WriteString(l + "\n")
	}
	return b.String()
}
