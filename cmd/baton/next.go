package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/schedule"
)

const nextHelp = `usage: baton next [--config FILE] [-n N] [--job NAME] [--from TIME]
       baton next SPEC [--tz ZONE] [-n N] [--from TIME]

Prints the next N fire times of every job (or of --job NAME) after now, or
after --from (RFC 3339, e.g. 2026-03-29T00:00:00+01:00), in the job's time
zone. A line whose UTC offset differs from the previous one's is marked
with the change, e.g. "(DST: UTC+1 -> UTC+2)". Redis is not contacted.

With a bare SPEC (a cron spec such as "0 9 * * 1-5", quoted, or a
descriptor such as @daily), no config is read: the fire times are those of
a job with that schedule in the time zone --tz (default UTC, as for a job
without timezone).

flags:
`

// maxNext caps -n.
const maxNext = 1000

// nextOpts are the flags of "baton next".
type nextOpts struct {
	path, job, from, tz, name, dst string
	n                              int
}

// defineNext defines the flags of "baton next".
func defineNext(fs *flagSet) *nextOpts {
	o := &nextOpts{}
	fs.configFlag(&o.path)
	fs.IntVarP(&o.n, "n", "n", 5, "how many fire times per job (1..1000)")
	fs.StringVar(&o.job, "job", "", "only the job `NAME`")
	fs.StringVar(&o.from, "from", "", "list fire times after this RFC 3339 `TIME` (default now)")
	fs.StringVar(&o.tz, "tz", "", "the time `ZONE` of a bare SPEC, e.g. Europe/Berlin (default UTC)")
	fs.StringVar(&o.dst, "dst", "", "the DST `POLICY` of a bare SPEC: vixie (default), once, skip or both")
	fs.StringVar(&o.name, "name", "", "the job `NAME` an H of a bare SPEC is picked for (a runtime schedule's: @ID)")
	return o
}

// runNext implements "baton next".
func runNext(fs *flagSet, o *nextOpts, args []string, stdout, stderr io.Writer) int {
	path, job := o.path, o.job
	if o.n < 1 || o.n > maxNext {
		return usageExit("next", usagef("-n %d: want 1..%d", o.n, maxNext), stderr)
	}
	after := time.Now()
	if o.from != "" {
		t, err := time.Parse(time.RFC3339, o.from)
		if err != nil {
			return usageExit("next", usagef("--from %q: want an RFC 3339 time such as 2026-03-29T00:00:00+01:00", o.from), stderr)
		}
		after = t
	}
	if len(args) > 0 {
		return nextSpec(fs, o, strings.Join(args, " "), after, stdout, stderr)
	}
	if o.tz != "" {
		return usageExit("next", usagef("--tz %q goes with a bare SPEC (baton next SPEC --tz ZONE); a job's zone is its timezone in the config", o.tz), stderr)
	}
	if o.dst != "" {
		return usageExit("next", usagef("--dst %q goes with a bare SPEC (baton next SPEC --dst POLICY); a job's policy is its dst in the config", o.dst), stderr)
	}
	if o.name != "" {
		return usageExit("next", usagef("--name %q goes with a bare SPEC (baton next SPEC --name JOB); a job of the config has its own name", o.name), stderr)
	}
	cfg, err := loadConfigFile(fs, path)
	if err != nil {
		return usageExit("next", err, stderr)
	}
	list := cfg.Jobs
	if job != "" {
		j, ok := cfg.Job(job)
		if !ok && config.IsScheduleJob(job) {
			// a runtime schedule's: read from the queue Redis
			c, err := baton.NewCluster(cfg)
			if err != nil {
				return usageExit("next", err, stderr)
			}
			defer c.Close()
			j, ok = c.Config().Job(job)
			if !ok {
				id, _ := config.ScheduleID(job)
				return usageExit("next", usagef("--job %q: no such runtime schedule %q (baton schedules list lists them)", job, id), stderr)
			}
		}
		if !ok {
			return usageExit("next", usagef("--job %q: no such job in %s", job, path), stderr)
		}
		list = []config.Job{*j}
	}
	for i := range list {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printNext(stdout, cfg, &list[i], after, o.n)
	}
	return 0
}

// nextSpec prints the next fire times of the bare schedule spec in --tz.
func nextSpec(fs *flagSet, o *nextOpts, spec string, after time.Time, stdout, stderr io.Writer) int {
	for _, f := range []string{"job", "config"} {
		if fs.isSet(f) && !fs.fromEnv[f] {
			return usageExit("next", usagef("a bare SPEC %q and --%s %q exclude each other: name a job of the config, or give a spec", spec, f, fs.Lookup(f).Value), stderr)
		}
	}
	zone := o.tz
	if zone == "" {
		zone = "UTC"
	}
	if zone == "Local" {
		return usageExit("next", usagef(`--tz "Local": name a zone such as UTC or Europe/Berlin, as a job's timezone must`), stderr)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return usageExit("next", usagef("--tz %q: unknown time zone", zone), stderr)
	}
	name, hashed := "schedule", ""
	if o.name != "" {
		name = o.name
		h, err := schedule.Hashed(spec, o.name)
		if err != nil {
			return usageExit("next", usagef("%s", err.Error()), stderr)
		}
		if h != strings.TrimSpace(spec) {
			hashed = h
		}
	}
	parsed := spec
	if hashed != "" {
		parsed = hashed
	}
	dst := schedule.DST(o.dst)
	if dst != "" && !dst.Valid() {
		return usageExit("next", usagef("--dst %q: want vixie, once, skip or both", o.dst), stderr)
	}
	sched, err := schedule.ParseDST(parsed, loc, dst)
	if err != nil {
		return usageExit("next", usagef("%s", err.Error()), stderr)
	}
	printNext(stdout, nil, &config.Job{Name: name, Schedule: spec, Hashed: hashed, Location: loc, DST: dst, Sched: sched}, after, o.n)
	return 0
}

// Between two ticks baton next lists at most maxExcludedShown of the
// spec's ticks that the calendars leave out, and counts up to
// maxExcludedCounted more.
const maxExcludedShown, maxExcludedCounted = 10, 10000

// printNext prints job j's header line and its next n ticks after after,
// with the ticks of its spec that its calendars (in cfg; nil: none) or its
// DST policy leave out.
func printNext(w io.Writer, cfg *config.Config, j *config.Job, after time.Time, n int) {
	if j.Sched == nil {
		fmt.Fprintf(w, "%s: %s, no schedule (runs continuously)\n", j.Name, j.Mode)
		return
	}
	paused := ""
	if j.Paused {
		paused = " (paused in config)"
	}
	extra := paused
	if j.DST != "" && j.DST != schedule.DSTVixie {
		extra += fmt.Sprintf(" (dst: %s)", j.DST)
	}
	if len(j.Exclude) > 0 {
		extra += " (exclude: " + strings.Join(j.Exclude, ", ") + ")"
	}
	if len(j.Only) > 0 {
		extra += " (only: " + strings.Join(j.Only, ", ") + ")"
	}
	if j.MaxRuns > 0 {
		extra += fmt.Sprintf(" (max_runs %d: stops after that many dispatched ticks, see baton status)", j.MaxRuns)
	}
	switch {
	case len(j.After) > 0:
		fmt.Fprintf(w, "%s: after %s (on_parent_failure: %s): once per tick of its parents, once they ended it%s\n",
			j.Name, strings.Join(j.After, ", "), j.OnParentFailure, extra)
	case j.At != "":
		fmt.Fprintf(w, "%s: one-shot at %s%s\n", j.Name, j.At, extra)
	default:
		hashed := ""
		if j.Hashed != "" {
			hashed = fmt.Sprintf(" (H for %s: %q)", j.Name, j.Hashed)
		}
		fmt.Fprintf(w, "%s: %q%s in %s%s\n", j.Name, j.Schedule, hashed, j.Location, extra)
	}
	spec := j.Schedule
	if j.Hashed != "" {
		spec = j.Hashed
	}
	from := after
	if st, err := time.Parse(time.RFC3339, j.Start); err == nil && st.Add(-time.Second).After(from) {
		from = st.Add(-time.Second) // a window's first tick is at or after its start
	}
	marks, err := schedule.Marks(j.Sched, spec, j.Location, j.DST, from, n)
	if err != nil || j.At != "" || len(j.After) > 0 {
		marks = nil
		for t := j.Sched.Next(after); !t.IsZero() && len(marks) < n; t = j.Sched.Next(t) {
			marks = append(marks, schedule.Mark{At: t, Ran: true})
		}
	}
	dst := string(j.DST)
	if dst == "" {
		dst = string(schedule.DSTVixie)
	}
	_, prev := after.In(j.Location).Zone()
	ran := 0
	last := after
	for _, m := range marks {
		local := m.At.In(j.Location)
		if m.Ran && j.Unfiltered != nil && cfg != nil {
			// the spec's ticks before this one that a calendar leaves out
			shown, more := 0, 0
			for u := j.Unfiltered.Next(last); !u.IsZero() && u.Before(m.At) && more < maxExcludedCounted; u = j.Unfiltered.Next(u) {
				why := cfg.ExcludedBy(j, u)
				switch {
				case why == "":
				case shown < maxExcludedShown:
					fmt.Fprintf(w, "  not run: %s  (excluded: %s)\n", u.In(j.Location).Format(time.RFC3339), why)
					shown++
				default:
					more++
				}
			}
			if more > 0 {
				fmt.Fprintf(w, "  not run: %d more ticks the calendars leave out\n", more)
			}
			last = m.At
		}
		if !m.Ran {
			fmt.Fprintf(w, "  not run: %s  (%s; dst: %s)\n", notRunWhen(m, local), notRunWhy(m), dst)
			continue
		}
		_, off := local.Zone()
		var notes []string
		if off != prev {
			notes = append(notes, fmt.Sprintf("DST: %s -> %s", formatOffset(prev), formatOffset(off)))
		}
		if len(m.Skipped) > 0 {
			notes = append(notes, skippedTimes(m)+" skipped by the clock change: run at the jump")
		}
		switch m.Copy {
		case 1:
			notes = append(notes, "repeated hour, first copy")
		case 2:
			notes = append(notes, "repeated hour, second copy")
		}
		line := "  " + local.Format(time.RFC3339)
		if len(notes) > 0 {
			line += "  (" + strings.Join(notes, "; ") + ")"
		}
		fmt.Fprintln(w, line)
		prev = off
		ran++
	}
	if ran < n {
		fmt.Fprintln(w, "  (no more ticks)")
	}
}

// notRunWhen is when a time the DST policy does not run is: its wall time
// for a skipped one (the clock never showed it), its instant for a copy.
func notRunWhen(m schedule.Mark, local time.Time) string {
	if len(m.Skipped) > 0 {
		return local.Format("2006-01-02") + " " + skippedTimes(m)
	}
	return local.Format(time.RFC3339)
}

// notRunWhy says why a time is not run.
func notRunWhy(m schedule.Mark) string {
	if len(m.Skipped) > 0 {
		return "skipped by the clock change"
	}
	return "repeated hour, second copy"
}

// skippedTimes lists the wall times a jump stands for: "02:30", "02:00,
// 02:15, 02:30 and 1 more".
func skippedTimes(m schedule.Mark) string {
	f := "15:04"
	if slices.ContainsFunc(m.Skipped, func(t time.Time) bool { return t.Second() != 0 }) {
		f = "15:04:05"
	}
	parts := make([]string, len(m.Skipped))
	for i, t := range m.Skipped {
		parts[i] = t.Format(f)
	}
	out := strings.Join(parts, ", ")
	if m.More > 0 {
		out += fmt.Sprintf(" and %d more", m.More)
	}
	return out
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
