package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/jobs"
)

const historyHelp = `usage: baton history [--config FILE] [-n N] [--json] JOB

Prints JOB's newest runs, newest tick first: the tick, the run id, how it
ended (ok, failed, skipped, replaced, dropped, timed out, lease lost; running or
dispatched while under way; unknown, with why, for a run recorded running
whose worker is gone or whose timeout has passed; missed or paused for
ticks that did not run),
the attempt, the exit code or HTTP status, the fencing token, the replica
that dispatched it and the one that ran it, when it started and how long it
took, and why it failed or did not run (with the last line of a failed
run's output). --json prints the records as a JSON array, with the tail of
each failed run's output (secrets masked).

The history lives in the queue Redis, history.runs records per job (default
100) and none older than history.max_age (default 7 days).

Exit status: 0 done; 1 Redis unreachable; 2 usage error (unknown job, bad
config).

flags:
`

// historyOpts are the flags of "baton history".
type historyOpts struct {
	path   string
	n      int
	asJSON bool
}

// defineHistory defines the flags of "baton history".
func defineHistory(fs *flagSet) *historyOpts {
	o := &historyOpts{}
	fs.configFlag(&o.path)
	fs.IntVarP(&o.n, "n", "n", 20, "print the newest `N` records (0: all that are kept)")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	return o
}

// runHistory implements "baton history".
func runHistory(fs *flagSet, o *historyOpts, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		return usageExit("history", usagef("name a job"), stderr)
	case len(args) > 1:
		return usageExit("history", usagef("name one job, got %d arguments: %q", len(args), args), stderr)
	case o.n < 0:
		return usageExit("history", usagef("-n must be >= 0, got %d", o.n), stderr)
	}
	c, exit := openCluster(fs, o.path, "history", stderr)
	if c == nil {
		return exit
	}
	defer c.Close()
	job := args[0]
	// a runtime schedule's history outlives its delete until it expires
	if _, ok := c.Config().Job(job); !ok && !strings.HasPrefix(job, "@") {
		return usageExit("history", noJob(c, job, o.path), stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := c.History(ctx, job, o.n)
	if err != nil {
		printf(stderr, "baton history: %v\n", errors.New(c.Config().MaskSecrets(err.Error())))
		return 1
	}
	if o.asJSON {
		if recs == nil {
			recs = []jobs.RunRecord{}
		}
		return printJSON(stdout, stderr, "history", recs)
	}
	if len(recs) == 0 {
		fmt.Fprintf(stdout, "no history of %s yet\n", job)
		return 0
	}
	// cells made inert (see printf); the replicas quoted besides, as names
	tw := newTable(stdout, "TICK", "STATUS", "RUN", "ATTEMPT", "CODE", "FENCE", "DISPATCHED BY", "RAN ON", "STARTED", "TOOK", "WHY")
	for _, r := range recs {
		tw.row(r.Tick.UTC().Format(time.RFC3339)+manualMark(r.Manual), string(r.Status), dash(r.RunID), num(r.Attempt), code(r),
			num64(r.Fence), dash(strconv.Quote(r.Dispatcher)), dash(strconv.Quote(r.Worker)), when(r.Started), took(r), why(r))
	}
	if err := tw.flush(); err != nil {
		return 1
	}
	return 0
}

func manualMark(m bool) string {
	if m {
		return " (manual)"
	}
	return ""
}

func dash(s string) string {
	if s == "" || s == `""` {
		return "-"
	}
	return s
}

func num(n int) string {
	if n == 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func num64(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func code(r jobs.RunRecord) string {
	switch {
	case r.ExitCode != nil:
		return "exit " + strconv.Itoa(*r.ExitCode)
	case r.HTTPStatus != 0:
		return "http " + strconv.Itoa(r.HTTPStatus)
	}
	return "-"
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func took(r jobs.RunRecord) string {
	if r.Started.IsZero() || r.Ended.IsZero() {
		return "-"
	}
	return r.Ended.Sub(r.Started).Round(time.Millisecond).String()
}

// why is a record's WHY cell: its reason and, for a failed run, the last
// line of its output tail, each on the row and escaped (read from Redis).
func why(r jobs.RunRecord) string {
	w := oneLine(r.Reason)
	if last := lastLine(r.Output); last != "" {
		w += ", output: " + oneLine(last)
	}
	return w
}

// lastLine is the last line of s that is not blank, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, " \t\r\n"), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// oneLine keeps a reason on its row: the first line, at most 120 bytes.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return dash(strconv.Quote(s))
}
