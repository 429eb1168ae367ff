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

const backfillHelp = `usage: baton backfill [--config FILE] [--dry-run] [--json] [--chain] --from TIME --to TIME JOB

Dispatches JOB's ticks between --from and --to (RFC 3339, inclusive) that
never ran: ticks recorded missed or paused, and ticks with no record and no
run in the history. Each goes through the tick claim and is enqueued under
the tick's own task ID, so it is dispatched exactly once even when several
backfills (or the schedule) race for it; a tick that ran is never
dispatched again. --dry-run lists them and dispatches nothing. Only cron
jobs can be backfilled. The window must be past, hold at most 10000 ticks,
and start within what the job's history (history.max_age, history.runs)
and tick records can tell.

--chain also backfills the jobs that run after JOB (after:, at any
depth), parents before children: each of their ticks in the window that
never ran waits in the queue for that tick of its parents to end, then
runs (or is skipped when a parent did not succeed, as on_parent_failure
says). A link that cannot be backfilled refuses the whole chain before
anything is dispatched.

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
	chain    bool
}

// defineBackfill defines the flags of "baton backfill".
func defineBackfill(fs *flagSet) *backfillOpts {
	o := &backfillOpts{}
	fs.configFlag(&o.path)
	fs.BoolVar(&o.dry, "dry-run", false, "list the ticks, dispatch nothing")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	fs.StringVar(&o.from, "from", "", "the window's first instant, RFC 3339 `TIME` (required)")
	fs.StringVar(&o.to, "to", "", "the window's last instant, RFC 3339 `TIME` (required)")
	fs.BoolVar(&o.chain, "chain", false, "also the jobs that run after JOB, each tick after its parents'")
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
	var plans []baton.BackfillPlan
	if o.chain {
		plans, err = c.BackfillChain(ctx, job, from, to, o.dry)
	} else {
		var plan baton.BackfillPlan
		plan, err = c.Backfill(ctx, job, from, to, o.dry)
		plans = []baton.BackfillPlan{plan}
	}
	if err != nil && !baton.AnyDispatched(plans) {
		msg := c.Config().MaskSecrets(err.Error())
		if isUsageError(err) {
			return usageExit("backfill", usagef("%s", msg), stderr)
		}
		printf(stderr, "baton backfill: %s\n", errors.New(msg))
		return 1
	}
	code := 0
	switch {
	case o.asJSON && o.chain:
		code = printJSON(stdout, stderr, "backfill", plans)
	case o.asJSON:
		code = printJSON(stdout, stderr, "backfill", plans[0])
	default:
		for _, plan := range plans {
			if printBackfill(plan, o.dry, stdout, stderr) != 0 {
				code = 1
			}
		}
	}
	if err != nil {
		// a chain dispatched in part: what it did is above
		printf(stderr, "baton backfill: %s\n", c.Config().MaskSecrets(err.Error()))
		return 1
	}
	for _, plan := range plans {
		if len(plan.Failed) > 0 {
			return 1
		}
	}
	return code
}

// printBackfill prints what a backfill found in one job's window and did;
// 1 when ticks were not dispatched.
func printBackfill(plan baton.BackfillPlan, dry bool, stdout, stderr io.Writer) int {
	job := plan.Job
	list := func(ts []time.Time) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = t.Format(time.RFC3339)
		}
		return strings.Join(s, " ")
	}
	waits := ""
	if !plan.AwaitUntil.IsZero() && len(plan.Ticks) > 0 {
		waits = fmt.Sprintf(" (each waits for its parents' tick until %s)", plan.AwaitUntil.Format(time.RFC3339))
	}
	switch {
	case dry:
		fmt.Fprintf(stdout, "%s: %d ticks in the window never ran (%d ran): %s%s\n", job, len(plan.Ticks), plan.Ran, list(plan.Ticks), waits)
	case len(plan.Ticks) == 0:
		fmt.Fprintf(stdout, "%s: every tick in the window ran (%d); nothing to backfill\n", job, plan.Ran)
	case len(plan.Dispatched)+len(plan.Decided)+len(plan.Failed) == 0:
		fmt.Fprintf(stdout, "%s: %d ticks not dispatched: the links before it did not finish\n", job, len(plan.Ticks))
	default:
		fmt.Fprintf(stdout, "%s: dispatched %d ticks: %s%s\n", job, len(plan.Dispatched), list(plan.Dispatched), waits)
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
