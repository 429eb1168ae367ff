package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/jobs"
)

const ticksHelp = `usage: baton ticks [--config FILE] [--from TIME] [--to TIME] [--json] JOB

Prints every scheduled tick of JOB between --from and --to (RFC 3339,
inclusive), oldest first, with what became of it: ok, failed (or timed
out, lease lost), running, dispatched (not started yet), dispatching (a
replica holds its claim), skipped, replaced, dropped, missed, paused (with
who paused the job and why), refused, due (not claimed yet, within its
starting deadline), not_due (ahead), unknown (before what the history and
the tick records keep). A run shows its run id, attempt, exit code or HTTP
status, fence, the replica that ran it and how long it took; manual runs
(baton trigger) are listed at their own tick, marked (manual), and ticks
run by a backfill or a resume's catch-up are marked (backfill).

Without --to the window ends now; without --from it starts 24 hours
before its end, cut to its last 100 ticks. At most 10000 ticks. --json
prints what GET /api/jobs/JOB/ticks answers.

Exit status: 0 done; 1 Redis unreachable; 2 usage error (unknown job,
singleton job, bad window, bad config).

flags:
`

// ticksOpts are the flags of "baton ticks".
type ticksOpts struct {
	path     string
	asJSON   bool
	from, to string
}

// defineTicks defines the flags of "baton ticks".
func defineTicks(fs *flagSet) *ticksOpts {
	o := &ticksOpts{}
	fs.configFlag(&o.path)
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.StringVar(&o.from, "from", "", "the window's first instant, RFC 3339 `TIME` (default: 24h before its end, at most 100 ticks)")
	fs.StringVar(&o.to, "to", "", "the window's last instant, RFC 3339 `TIME` (default: now)")
	return o
}

// runTicks implements "baton ticks".
func runTicks(fs *flagSet, o *ticksOpts, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		return usageExit("ticks", usagef("name one job, got %d arguments: %q", len(args), args), stderr)
	}
	var window [2]time.Time
	for i, f := range []struct{ name, val string }{{"--from", o.from}, {"--to", o.to}} {
		if f.val == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, f.val)
		if err != nil {
			return usageExit("ticks", usagef("%s %q: want an RFC 3339 time such as 2026-11-25T02:00:00Z", f.name, f.val), stderr)
		}
		window[i] = t
	}
	c, exit := openCluster(fs, o.path, "ticks", stderr)
	if c == nil {
		return exit
	}
	defer c.Close()
	job := args[0]
	// a deleted runtime schedule's runs stay listed while its history keeps them
	if _, ok := c.Config().Job(job); !ok && !strings.HasPrefix(job, "@") {
		return usageExit("ticks", noJob(c, job, o.path), stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Ticks(ctx, job, window[0], window[1])
	if err != nil {
		msg := c.Config().MaskSecrets(err.Error())
		if errors.Is(err, baton.ErrTickWindow) || errors.Is(err, baton.ErrNotTriggerable) || errors.Is(err, baton.ErrUnknownJob) {
			return usageExit("ticks", usagef("%s", msg), stderr)
		}
		printf(stderr, "baton ticks: %s\n", errors.New(msg))
		return 1
	}
	if o.asJSON {
		return printJSON(stdout, stderr, "ticks", l)
	}
	printf(stdout, "%s: %d ticks from %s to %s; known from %s (before it, ticks without a record are unknown)\n", job, len(l.Ticks),
		l.From.Format(time.RFC3339), l.To.Format(time.RFC3339), l.KnownFrom.Truncate(time.Second).Format(time.RFC3339))
	for _, w := range l.Warnings {
		printf(stderr, "baton ticks: warning: %s\n", w)
	}
	if len(l.Ticks) == 0 {
		return 0
	}
	// cells made inert (see printf); the replica quoted besides, as a name
	tw := newTable(stdout, "TICK", "OUTCOME", "RUN", "ATTEMPT", "CODE", "FENCE", "RAN ON", "TOOK", "WHY")
	for _, lt := range l.Ticks {
		tw.row(ledgerTick(lt), outcome(lt), dash(lt.RunID), num(lt.Attempt), ledgerCode(lt), num64(lt.Fence),
			dash(strconv.Quote(lt.Worker)), ledgerTook(lt), ledgerWhy(lt))
	}
	if err := tw.flush(); err != nil {
		return 1
	}
	return 0
}

// ledgerTick is a ledger entry's TICK cell: a manual run's to the
// millisecond, and marked.
func ledgerTick(lt baton.LedgerTick) string {
	if lt.Manual {
		return lt.Tick.UTC().Format("2006-01-02T15:04:05.000Z07:00") + " (manual)"
	}
	s := lt.Tick.UTC().Format(time.RFC3339)
	if lt.Backfill {
		s += " (backfill)"
	}
	return s
}

// outcome is an entry's OUTCOME cell: the history's status where it says
// more (timed out, lease lost).
func outcome(lt baton.LedgerTick) string {
	if lt.Outcome == baton.OutcomeFailed && lt.Status != "" {
		return string(lt.Status)
	}
	return string(lt.Outcome)
}

func ledgerCode(lt baton.LedgerTick) string {
	return code(jobs.RunRecord{ExitCode: lt.ExitCode, HTTPStatus: lt.HTTPStatus})
}

func ledgerTook(lt baton.LedgerTick) string {
	return took(jobs.RunRecord{Started: lt.Started, Ended: lt.Ended})
}

// ledgerWhy is an entry's WHY cell: its reason, a paused tick's pause (who,
// since when, the note) and a failed run's last line of output, escaped.
func ledgerWhy(lt baton.LedgerTick) string {
	w := why(jobs.RunRecord{Reason: lt.Reason, Output: lt.Output})
	if p := lt.Pause; p != nil {
		by := "paused by " + strconv.Quote(p.By)
		if !p.At.IsZero() {
			by += " since " + p.At.UTC().Format(time.RFC3339)
		}
		if p.Note != "" {
			by += ": " + oneLine(p.Note)
		}
		if w == "-" {
			return by
		}
		return fmt.Sprintf("%s; %s", w, by)
	}
	return w
}
