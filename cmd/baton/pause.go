package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redact"
)

const pauseHelp = `usage: baton pause [--config FILE] [--note TEXT] [--by NAME] [--for DURATION | --until TIME] JOB...
       baton resume [--config FILE] [--skip | --catch-up] JOB...

pause sets a job's pause flag in Redis, on every lock master, with who
paused it (--by, default the OS user), since when and why (--note, at most
500 bytes): baton status and the dashboard show them. Pausing a paused job
again replaces who and why (and the end) and keeps since when. resume
clears the flag. --for 2h or --until 2026-12-24T18:00:00Z ends the pause
by itself: each lock master drops its flag then, by its own clock, and
the job runs again from its first tick due after (status and the
dashboard show the end; without one, the pause lasts until a resume).
The scheduler's claim reads the flag and decides by a quorum of lock
masters, so the change reaches every replica at the next tick once a
majority has it: a paused job's ticks are recorded as paused.

On resume, --skip (the default) leaves the paused ticks skipped;
--catch-up replays the ticks recorded paused since the pause began that
were due within the job's starting deadline, through the tick claim (each
at most once, also when run again); older paused ticks stay skipped, and
a job whose runs cannot overlap (concurrency other than allow) replays only
the newest. Catch-up is for cron jobs.

When some masters could not be written, the command says so and whether
the change is in effect; running it again repairs the rest. A job with
paused: true in the config stays paused until the config changes (the
config wins over resume).

Exit status: 0 done; 1 not written to every master (see the message),
ticks not replayed, or Redis unreachable; 2 usage error (unknown job, bad
flags, bad config).

flags:
`

// pauseOpts are the flags of "baton pause" (on) or "baton resume".
type pauseOpts struct {
	on            bool
	path          string
	note, by      string        // pause
	pauseFor      time.Duration // pause: its end, from now
	until         string        // pause: its end (RFC 3339)
	skip, catchUp bool          // resume
}

// pauseFlags returns the flag definitions of "baton pause" (on) or "baton
// resume".
func pauseFlags(on bool) func(fs *flagSet) *pauseOpts {
	return func(fs *flagSet) *pauseOpts {
		o := &pauseOpts{on: on}
		fs.configFlag(&o.path)
		if on {
			fs.StringVar(&o.note, "note", "", "why the job is paused, shown by status and the dashboard (at most 500 bytes)")
			fs.StringVar(&o.by, "by", "", "who pauses it (default: the OS user)")
			fs.DurationVar(&o.pauseFor, "for", 0, "end the pause by itself after this `DURATION` (2h, 30m)")
			fs.StringVar(&o.until, "until", "", "end the pause by itself at this RFC 3339 `TIME`")
		} else {
			fs.BoolVar(&o.skip, "skip", false, "leave the paused ticks skipped (the default)")
			fs.BoolVar(&o.catchUp, "catch-up", false, "replay the paused ticks due within the starting deadline")
		}
		return o
	}
}

// runPause implements "baton pause" (on) and "baton resume" (!on).
func runPause(fs *flagSet, o *pauseOpts, args []string, stdout, stderr io.Writer) int {
	name, on, path := fs.name, o.on, o.path
	if len(args) == 0 {
		return usageExit(name, usagef("name at least one job"), stderr)
	}
	if !on && o.skip && o.catchUp {
		return usageExit(name, usagef("--skip and --catch-up exclude each other: choose one"), stderr)
	}
	why := baton.PauseNote{}
	if on {
		why = baton.PauseNote{By: o.by, Note: o.note}
		if !fs.isSet("by") {
			why.By = osUser()
		}
		switch {
		case fs.isSet("for") && fs.isSet("until"):
			return usageExit(name, usagef("--for and --until exclude each other: give one"), stderr)
		case fs.isSet("for") && o.pauseFor <= 0:
			return usageExit(name, usagef("--for %s: want a positive duration such as 2h", o.pauseFor), stderr)
		case fs.isSet("for"):
			why.Until = time.Now().Add(o.pauseFor)
		case fs.isSet("until"):
			t, err := time.Parse(time.RFC3339, o.until)
			if err != nil {
				return usageExit(name, usagef("--until %q: want an RFC 3339 time such as 2026-12-24T18:00:00Z", o.until), stderr)
			}
			why.Until = t
		}
		if err := why.Check(); err != nil {
			return usageExit(name, usagef("%s", err), stderr)
		}
	}
	cfg, err := loadConfigFile(fs, path)
	if err != nil {
		return usageExit(name, err, stderr) // config errors: one line each
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	defer c.Close()
	for _, job := range args {
		j, err := tickedJob(c, job, path, "pause")
		switch {
		case err != nil:
			return usageExit(name, err, stderr)
		case !on && o.catchUp && j.Mode != config.ModeCron:
			return usageExit(name, usagef("job %q is a %s job: only cron jobs can catch up paused ticks; resume it without --catch-up", job, j.Mode), stderr)
		}
	}
	timeout := 10 * time.Second
	if !on && o.catchUp {
		timeout = 5 * time.Minute // replays go through the claim
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// every master is written, in parallel; the claim decides by quorum, so
	// a change that reached a majority is in effect, and running the
	// command again repairs the rest
	failed := false
	for _, job := range args {
		var res baton.PauseResult
		var cu *baton.CatchUpResult
		if on {
			res, err = c.Pause(ctx, job, why)
		} else {
			var rr baton.ResumeResult
			rr, err = c.Resume(ctx, job, o.catchUp)
			res, cu = rr.PauseResult, rr.CatchUp
		}
		if err != nil && cu == nil {
			msg := c.Config().MaskSecrets(err.Error())
			if isUsageError(err) || errors.Is(err, baton.ErrBadPause) {
				return usageExit(name, usagef("%s", msg), stderr)
			}
			printf(stderr, "baton %s: %s\n", name, errors.New(msg))
			return 1
		}
		if !printPause(name, res, stdout, stderr) {
			failed = true
		}
		if cu != nil && !printCatchUp(name, job, cu, err, c.Config(), stdout, stderr) {
			failed = true
		}
	}
	if failed {
		return 1
	}
	return 0
}

// tickedJob is the job (of the list, or a runtime schedule "@id": the
// cluster's config finds both) that a command which acts on ticks names,
// or the usage error of a job it does not know or a singleton, which has
// no ticks (to verb).
func tickedJob(c *baton.Cluster, job, path, verb string) (*config.Job, error) {
	j, ok := c.Config().Job(job)
	switch {
	case !ok && config.IsScheduleJob(job):
		id, _ := config.ScheduleID(job)
		return nil, usagef("no such runtime schedule %q (baton schedules list lists them)", id)
	case !ok:
		return nil, noJob(c, job, path)
	case j.Mode == config.ModeSingleton:
		return nil, usagef("job %q is a singleton: it has no ticks to %s", job, verb)
	}
	return j, nil
}

// printPause says how far a pause or resume got; false when not every
// master took it.
func printPause(name string, res baton.PauseResult, stdout, stderr io.Writer) bool {
	state := "resumed"
	if res.Paused {
		state = "paused"
		if p := res.Pause; p != nil {
			state += " by " + redact.Quote(p.By) + " since " + p.At.Format(time.RFC3339)
			if !p.Until.IsZero() {
				state += " until " + p.Until.Format(time.RFC3339)
			}
			if p.Note != "" {
				state += ": " + redact.Quote(p.Note)
			}
		}
	}
	switch {
	case res.Written == res.Masters:
		printf(stdout, "%s %s\n", res.Job, state)
		return true
	case res.InEffect:
		printf(stdout, "%s %s (on %d of %d lock masters: in effect; run the command again to repair the rest)\n", res.Job, state, res.Written, res.Masters)
	default:
		verb := "resumed"
		if res.Paused {
			verb = "paused"
		}
		fmt.Fprintf(stderr, "baton %s: job %q: written to %d of %d lock masters, %d needed: NOT %s; run the command again\n", name, res.Job, res.Written, res.Masters, res.Masters/2+1, verb)
	}
	for _, f := range res.Failures {
		printf(stderr, "baton %s: job %q: %s\n", name, res.Job, f)
	}
	return false
}

// printCatchUp says what a resume's catch-up replayed and left skipped;
// false when ticks were not replayed that should have been.
func printCatchUp(name, job string, cu *baton.CatchUpResult, err error, cfg *config.Config, stdout, stderr io.Writer) bool {
	fmt.Fprintf(stdout, "%s: replayed %d paused ticks%s\n", job, len(cu.Replayed), times(cu.Replayed))
	if len(cu.Decided) > 0 {
		fmt.Fprintf(stdout, "%s: %d paused ticks were replayed already%s\n", job, len(cu.Decided), times(cu.Decided))
	}
	for _, s := range cu.Skipped {
		printf(stdout, "%s: stays skipped: %s (%s)\n", job, s.Tick.Format(time.RFC3339), s.Reason)
	}
	ok := len(cu.Failed) == 0 && err == nil
	if len(cu.Failed) > 0 {
		printf(stderr, "baton %s: %s: %d paused ticks not replayed (%s)%s; run baton resume --catch-up again (within the starting deadline)\n",
			name, job, len(cu.Failed), cfg.MaskSecrets(cu.Reason), times(cu.Failed))
	}
	if err != nil {
		printf(stderr, "baton %s: %s: catch-up: %s\n", name, job, errors.New(cfg.MaskSecrets(err.Error())))
	}
	return ok
}

// times lists ts as ": T1 T2 ..." ("" for none).
func times(ts []time.Time) string {
	if len(ts) == 0 {
		return ""
	}
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.Format(time.RFC3339)
	}
	return ": " + strings.Join(s, " ")
}

// osUser names the OS user running this process, for who paused a job:
// the account's name, else $USER, else "unknown".
func osUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}
