package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
)

const pauseHelp = `usage: baton pause|resume [--config FILE] JOB...

pause sets a job's pause flag in Redis, on every lock master; resume clears
it. The scheduler's claim reads the flag and decides by a quorum of lock
masters, so the change reaches every replica at the next tick once a
majority has it: a paused job's ticks are recorded as skipped (and not
caught up later). When some masters could not be written, the command says
so and whether the change is in effect; running it again repairs the rest.
A job with paused: true in the config stays paused until the config
changes (the config wins over resume).

Exit status: 0 done; 1 not written to every master (see the message) or
Redis unreachable; 2 usage error (unknown job, bad config).

flags:
`

// runPause implements "baton pause" (on) and "baton resume" (!on).
func runPause(name string, on bool, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(name)
	var path string
	fs.stringEnv(&path, "config", envConfig, defaultConfigFile, "config `FILE`")
	if err := fs.parse(args, pauseHelp, stdout); err != nil {
		return exitParse(name, err, stderr)
	}
	if fs.NArg() == 0 {
		return usageExit(name, usagef("name at least one job"), stderr)
	}
	cfg, err := loadConfigFile(fs, path)
	if err != nil {
		return usageExit(name, err, stderr) // config errors: one line each
	}
	for _, job := range fs.Args() {
		j, ok := cfg.Job(job)
		if !ok {
			return usageExit(name, usagef("no job %q in %s", job, path), stderr)
		}
		if j.Mode == config.ModeSingleton {
			return usageExit(name, usagef("job %q is a singleton: it has no ticks to pause", job), stderr)
		}
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// every master is written, in parallel; the claim decides by quorum, so
	// a change that reached a majority is in effect, and running the
	// command again repairs the rest
	failed := false
	for _, job := range fs.Args() {
		res, err := c.Pause(ctx, job, on)
		if err != nil {
			return usageExit(name, err, stderr)
		}
		state := "paused"
		if !on {
			state = "resumed"
		}
		switch {
		case res.Written == res.Masters:
			fmt.Fprintf(stdout, "%s %s\n", job, state)
			continue
		case res.InEffect:
			fmt.Fprintf(stdout, "%s %s (on %d of %d lock masters: in effect; run the command again to repair the rest)\n", job, state, res.Written, res.Masters)
		default:
			fmt.Fprintf(stderr, "baton %s: job %q: written to %d of %d lock masters, %d needed: NOT %s; run the command again\n", name, job, res.Written, res.Masters, res.Masters/2+1, state)
		}
		failed = true
		for _, f := range res.Failures {
			fmt.Fprintf(stderr, "baton %s: job %q: %s\n", name, job, f)
		}
	}
	if failed {
		return 1
	}
	return 0
}
