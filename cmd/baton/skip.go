package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/redact"
)

const skipHelp = `usage: baton skip [--config FILE] [--next N | --tick TIME...] [--note TEXT] [--by NAME] JOB

Skips ticks of JOB before they are due: its next N ticks (--next, 1 by
default), or each --tick named (RFC 3339, a tick of the job's schedule:
baton next lists them). Each tick is recorded not to run on every lock
master, as a paused job's tick is: no replica dispatches it, and baton
history, baton ticks and the dashboard show it skipped, with who (--by,
default the OS user) and why (--note). A tick a replica has claimed
already (due within the clock skew bound, or being dispatched) is not
skipped, and said so. A backfill over a skipped tick may still run it.
Runtime schedules are skipped as @ID.

Exit status: 0 every tick skipped; 1 a tick not skipped (see the
message) or Redis unreachable; 2 usage error (unknown job, not a tick,
bad flags, bad config).

flags:
`

// skipOpts are the flags of "baton skip".
type skipOpts struct {
	path, note, by string
	next           int
	ticks          []string
}

// defineSkip defines the flags of "baton skip".
func defineSkip(fs *flagSet) *skipOpts {
	o := &skipOpts{}
	fs.configFlag(&o.path)
	fs.IntVar(&o.next, "next", 0, "skip the job's next `N` ticks (default 1 when no --tick is named)")
	fs.StringArrayVar(&o.ticks, "tick", nil, "skip this tick (RFC 3339 `TIME`); repeatable")
	fs.StringVar(&o.note, "note", "", "why, shown in the history (at most 500 bytes)")
	fs.StringVar(&o.by, "by", "", "who skips them (default: the OS user)")
	return o
}

// runSkip implements "baton skip".
func runSkip(fs *flagSet, o *skipOpts, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		return usageExit("skip", usagef("name one job"), stderr)
	}
	req := baton.SkipRequest{By: o.by, Note: o.note, Next: o.next}
	if !fs.isSet("by") {
		req.By = osUser()
	}
	switch {
	case fs.isSet("next") && len(o.ticks) > 0:
		return usageExit("skip", usagef("--next and --tick exclude each other: give one"), stderr)
	case fs.isSet("next") && (o.next < 1 || o.next > baton.MaxSkip):
		return usageExit("skip", usagef("--next %d: skip 1 to %d ticks at once", o.next, baton.MaxSkip), stderr)
	case !fs.isSet("next") && len(o.ticks) == 0:
		req.Next = 1
	}
	for _, s := range o.ticks {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return usageExit("skip", usagef("--tick %q: want an RFC 3339 time such as 2026-12-24T18:00:00Z", s), stderr)
		}
		req.Ticks = append(req.Ticks, t)
	}
	if err := (baton.PauseNote{By: req.By, Note: req.Note}).Check(); err != nil {
		return usageExit("skip", usagef("%s", strings.Replace(err.Error(), "who pauses it", "who skips them", 1)), stderr)
	}
	c, exit := openCluster(fs, o.path, "skip", stderr)
	if c == nil {
		return exit
	}
	defer c.Close()
	job := args[0]
	if _, err := tickedJob(c, job, o.path, "skip"); err != nil {
		return usageExit("skip", err, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Skip(ctx, job, req)
	if err != nil {
		msg := c.Config().MaskSecrets(err.Error())
		if errors.Is(err, baton.ErrBadPause) {
			return usageExit("skip", usagef("%s", strings.TrimPrefix(msg, "baton: bad pause: ")), stderr)
		}
		printf(stderr, "baton skip: %s\n", errors.New(msg))
		return 1
	}
	for _, t := range res.Skipped {
		line := fmt.Sprintf("%s: skipped %s, by %s", job, t.Format(time.RFC3339), redact.Quote(req.By))
		if req.Note != "" {
			line += ": " + redact.Quote(req.Note)
		}
		printf(stdout, "%s\n", line)
	}
	for _, r := range res.Refused {
		printf(stderr, "baton skip: %s: tick %s not skipped: %s\n", job, r.Tick.Format(time.RFC3339), r.Reason)
	}
	for _, f := range res.Failures {
		printf(stderr, "baton skip: %s: %s\n", job, f)
	}
	if len(res.Refused) > 0 {
		return 1
	}
	return 0
}
