package main

import (
	"fmt"
	"io"
	"time"

	"github.com/batonhq/baton/config"
)

const nextHelp = `usage: baton next [--config FILE] [-n N] [--job NAME] [--from TIME]

Prints the next N fire times of every job (or of --job NAME) after now, or
after --from (RFC 3339, e.g. 2026-03-29T00:00:00+01:00), in the job's time
zone. A line whose UTC offset differs from the previous one's is marked
with the change, e.g. "(DST: UTC+1 -> UTC+2)". Redis is not contacted.

flags:
`

// maxNext caps -n.
const maxNext = 1000

// runNext implements "baton next".
func runNext(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("next")
	var path, job, from string
	fs.stringEnv(&path, "config", envConfig, defaultConfigFile, "config `FILE`")
	n := fs.Int("n", 5, "how many fire times per job (1..1000)")
	fs.StringVar(&job, "job", "", "only the job `NAME`")
	fs.StringVar(&from, "from", "", "list fire times after this RFC 3339 `TIME` (default now)")
	if err := fs.parse(args, nextHelp, stdout); err != nil {
		return exitParse("next", err, stderr)
	}
	if fs.NArg() > 0 {
		return usageExit("next", usagef("unexpected argument %q", fs.Arg(0)), stderr)
	}
	if *n < 1 || *n > maxNext {
		return usageExit("next", usagef("-n %d: want 1..%d", *n, maxNext), stderr)
	}
	after := time.Now()
	if from != "" {
		t, err := time.Parse(time.RFC3339, from)
		if err != nil {
			return usageExit("next", usagef("--from %q: want an RFC 3339 time such as 2026-03-29T00:00:00+01:00", from), stderr)
		}
		after = t
	}
	cfg, err := loadConfigFile(fs, path)
	if err != nil {
		return usageExit("next", err, stderr)
	}
	list := cfg.Jobs
	if job != "" {
		j, ok := cfg.Job(job)
		if !ok {
			return usageExit("next", usagef("--job %q: no such job in %s", job, path), stderr)
		}
		list = []config.Job{*j}
	}
	for i := range list {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printNext(stdout, &list[i], after, *n)
	}
	return 0
}

// printNext prints job j's header line and its next n ticks after after.
func printNext(w io.Writer, j *config.Job, after time.Time, n int) {
	if j.Sched == nil {
		fmt.Fprintf(w, "%s: %s, no schedule (runs continuously)\n", j.Name, j.Mode)
		return
	}
	paused := ""
	if j.Paused {
		paused = " (paused in config)"
	}
	extra := paused
	if j.MaxRuns > 0 {
		extra += fmt.Sprintf(" (max_runs %d: stops after that many dispatched ticks, see baton status)", j.MaxRuns)
	}
	if j.At != "" {
		fmt.Fprintf(w, "%s: one-shot at %s%s\n", j.Name, j.At, extra)
	} else {
		fmt.Fprintf(w, "%s: %q in %s%s\n", j.Name, j.Schedule, j.Location, extra)
	}
	_, prev := after.In(j.Location).Zone()
	t := after
	for range n {
		t = j.Sched.Next(t)
		if t.IsZero() {
			fmt.Fprintln(w, "  (no more ticks)")
			return
		}
		local := t.In(j.Location)
		_, off := local.Zone()
		line := "  " + local.Format(time.RFC3339)
		if off != prev {
			line += fmt.Sprintf("  (DST: %s -> %s)", formatOffset(prev), formatOffset(off))
		}
		fmt.Fprintln(w, line)
		prev = off
	}
}

// formatOffset writes a UTC offset in seconds as UTC+1, UTC-3:30, UTC+0.
func formatOffset(sec int) string {
	sign := '+'
	if sec < 0 {
		sign, sec = '-', -sec
	}
	h, m := sec/3600, sec%3600/60
	if m != 0 {
		return fmt.Sprintf("UTC%c%d:%02d", sign, h, m)
	}
	return fmt.Sprintf("UTC%c%d", sign, h)
}
