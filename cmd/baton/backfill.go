package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/batonhq/baton"
)

const backfillHelp = `usage: baton backfill [--config FILE] [--dry-run] [--json] --from TIME --to TIME JOB

Dispatches JOB's ticks between --from and --to (RFC 3339, inclusive) that
never ran: ticks recorded missed or paused, and ticks with no record and no
run in the history. Each goes through the tick claim and is enqueued under
the tick's own task ID, so it is dispatched exactly once even when several
backfills (or the schedule) race for it; a tick that ran is never
dispatched again. --dry-run lists them and dispatches nothing. Only cron
jobs can be backfilled. The window must be past, hold at most 10000 ticks,
and start within what the job's history (history.max_age, history.runs)
and tick records can tell.

Exit status: 0 done (or listed); 1 Redis unreachable or ticks not
dispatched; 2 usage error (unknown job, bad window, bad config).

flags:
`

// backfillOpts are the flags of "baton backfill".
type backfillOpts struct {
	path     string
	dry      bool
	asJSON   bool
	from, to string
}

// defineBackfill defines the flags of "baton backfill".
func defineBackfill(fs *flagSet) *backfillOpts {
	o := &backfillOpts{}
	fs.configFlag(&o.path)
	fs.BoolVar(&o.dry, "dry-run", false, "list the ticks, dispatch nothing")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.StringVar(&o.from, "from", "", "the window's first instant, RFC 3339 `TIME` (required)")
	fs.StringVar(&o.to, "to", "", "the window's last instant, RFC 3339 `TIME` (required)")
	return o
}

// runBackfill implements "baton backfill".
func runBackfill(fs *flagSet, o *backfillOpts, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		return usageExit("backfill", usagef("name one job, got %d arguments: %q", len(args), args), stderr)
	}
	from, err := time.Parse(time.RFC3339, o.from)
	if err != nil {
		return usageExit("backfill", usagef("--from %q: want an RFC 3339 time such as 2026-11-25T02:00:00Z", o.from), stderr)
	}
	to, err := time.Parse(time.RFC3339, o.to)
	if err != nil {
		return usageExit("backfill", usagef("--to %q: want an RFC 3339 time such as 2026-11-25T06:00:00Z", o.to), stderr)
	}
	c, exit := openCluster(fs, o.path, "backfill", stderr)
	if c == nil {
		return exit
	}
	defer c.Close()
	job := args[0]
	if _, ok := c.Config().Job(job); !ok {
		return usageExit("backfill", noJob(c, job, o.path), stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	plan, err := c.Backfill(ctx, job, from, to, o.dry)
	if err != nil {
		msg := c.Config().MaskSecrets(err.Error())
		if isUsageError(err) {
			return usageExit("backfill", usagef("%s", msg), stderr)
		}
		printf(stderr, "baton backfill: %s\n", errors.New(msg))
		return 1
	}
	if o.asJSON {
		code := printJSON(stdout, stderr, "backfill", plan)
		if len(plan.Failed) > 0 {
			return 1
		}
		return code
	}
	list := func(ts []time.Time) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = t.Format(time.RFC3339)
		}
		return strings.Join(s, " ")
	}
	switch {
	case o.dry:
		fmt.Fprintf(stdout, "%s: %d ticks in the window never ran (%d ran): %s\n", job, len(plan.Ticks), plan.Ran, list(plan.Ticks))
	case len(plan.Ticks) == 0:
		fmt.Fprintf(stdout, "%s: every tick in the window ran (%d); nothing to backfill\n", job, plan.Ran)
	default:
		fmt.Fprintf(stdout, "%s: dispatched %d ticks: %s\n", job, len(plan.Dispatched), list(plan.Dispatched))
		if len(plan.Decided) > 0 {
			fmt.Fprintf(stdout, "%s: %d ticks were dispatched meanwhile by another backfill or the schedule: %s\n", job, len(plan.Decided), list(plan.Decided))
		}
	}
	if len(plan.Failed) > 0 {
		printf(stderr, "baton backfill: %s: %d ticks not dispatched (%s): %s; run the command again\n", job, len(plan.Failed), plan.Reason, list(plan.Failed))
		return 1
	}
	return 0
}

// isUsageError tells the errors of a backfill the caller can fix by asking
// differently (exit 2) from Redis failing (exit 1).
func isUsageError(err error) bool {
	return errors.Is(err, baton.ErrBackfillWindow) || errors.Is(err, baton.ErrNotTriggerable) || errors.Is(err, baton.ErrUnknownJob)
}
