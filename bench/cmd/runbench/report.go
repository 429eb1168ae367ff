package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton/bench/internal/machine"
	"github.com/batonhq/baton/bench/internal/mdtable"
	"github.com/batonhq/baton/bench/internal/stats"
)

// secs formats a duration in seconds with two decimals.
func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

// lagCells are p50, p99 and max of s in seconds ("n/a" without samples).
func lagCells(s []time.Duration) (string, string, string) {
	if len(s) == 0 {
		return "n/a", "n/a", "n/a"
	}
	c := slices.Clone(s)
	return secs(stats.Percentile(c, 50)), secs(stats.Percentile(c, 99)), secs(stats.Max(c))
}

// total sums a cell's instants.
func total(r cellResult) instantResult {
	var t instantResult
	for _, i := range r.instants {
		t.due += i.due
		t.dispatched += i.dispatched
		t.started += i.started
		t.duplicates += i.duplicates
		t.extra += i.extra
		t.missed += i.missed
		t.dispatchErrors += i.dispatchErrors
		t.lag = append(t.lag, i.lag...)
		t.dispatchLag = append(t.dispatchLag, i.dispatchLag...)
	}
	return t
}

func render(cfg cellConfig, results []cellResult, mach []string) string {
	var w strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&w, format, args...) }
	p("# Runtime schedules: N schedules made while running, all due at the same instant\n\n")
	for _, m := range mach {
		p("- %s\n", m)
	}
	p("\nEach system gets N = %d schedules, one per customer, added at runtime (not from a file) on %d replicas, all on the same "+
		"epoch-aligned schedule, so all N are due at the same instant. A *tick* is one (schedule, due instant). "+
		"*Dispatched*: jobs/tasks created for the instants (duplicates included). *Started*: ticks started by a worker at least once. "+
		"*Lag*: due instant → first start of the tick by a worker (seconds; includes the queue's own wait behind the other N−1 ticks). "+
		"*Dispatch lag*: due instant → job/task created. *Duplicates*: ticks dispatched or started more than once (extra copies in parentheses). "+
		"*Missed*: ticks never started by the end of the drain (up to %v after the last instant).\n\n", cfg.schedules, cfg.replicas, cfg.drain)

	t := mdtable.Table{
		Header: []string{"system", "schedules", "replicas", "instants", "ticks due", "dispatched", "started", "lag p50 / p99 / max (s)", "dispatch lag p50 / max (s)", "duplicates", "missed / lost"},
		Align:  []byte{'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'},
	}
	for _, r := range results {
		s := total(r)
		a, b, c := lagCells(s.lag)
		d50, _, dmax := lagCells(s.dispatchLag)
		t.Add(r.system, fmt.Sprint(r.schedules), fmt.Sprint(r.replicas), fmt.Sprint(len(r.instants)), fmt.Sprint(s.due),
			fmt.Sprint(s.dispatched), fmt.Sprint(s.started), a+" / "+b+" / "+c, d50+" / "+dmax,
			fmt.Sprintf("%d (%d)", s.duplicates, s.extra), fmt.Sprint(s.missed))
	}
	if len(results) > 0 {
		p("%s\n", t.String())
	}

	for _, r := range results {
		p("## %s\n\n", r.system)
		p("Runs with: %s.\n\n", r.runsWith)
		it := mdtable.Table{
			Header: []string{"instant", "", "due", "dispatched", "dispatch errors", "started", "lag p50 / p99 / max (s)", "dispatch lag p50 / max (s)", "duplicates", "missed / lost"},
			Align:  []byte{'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'},
		}
		for _, i := range r.instants {
			a, b, c := lagCells(i.lag)
			d50, _, dmax := lagCells(i.dispatchLag)
			it.Add(i.at.UTC().Format("15:04:05"), i.label, fmt.Sprint(i.due), fmt.Sprint(i.dispatched), fmt.Sprint(i.dispatchErrors), fmt.Sprint(i.started),
				a+" / "+b+" / "+c, d50+" / "+dmax, fmt.Sprintf("%d (%d)", i.duplicates, i.extra), fmt.Sprint(i.missed))
		}
		p("%s\n", it.String())
		p("- registering the %d schedules on every replica took %v\n", r.schedules, r.addTook.Round(time.Millisecond))
		if r.kill != "" {
			p("- leader kill: %s\n", r.kill)
		}
		for _, m := range r.memory {
			p("- %s\n", m)
		}
		for _, n := range r.notes {
			p("- %s\n", n)
		}
		p("\n")
	}
	return w.String()
}

// describeMachine lists what the numbers depend on.
func describeMachine(began time.Time, pgVersion string) []string {
	lines := machine.Describe(began, "persistence off, loopback, started by the benchmark",
		[]string{"github.com/batonhq/baton", "github.com/hibiken/asynq", "github.com/redis/go-redis/v9",
			"github.com/riverqueue/river", "github.com/riverqueue/river/riverdriver/riverpgxv5", "github.com/jackc/pgx/v5"},
		"cd bench && go run ./cmd/runbench", os.Args[1:])
	if pgVersion != "" {
		lines = append(lines, "PostgreSQL: "+pgVersion+" (throwaway cluster in a temp dir, loopback, fsync/synchronous_commit/full_page_writes off, shared_buffers 256MB)")
	}
	return lines
}
