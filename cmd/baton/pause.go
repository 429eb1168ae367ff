package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/scheduler"
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
	masters, closeAll, err := lockMasters(cfg)
	if err != nil {
		return usageExit(name, err, stderr)
	}
	defer closeAll()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// every master is written, in parallel; the claim decides by quorum, so
	// a change that reached a majority is in effect, and running the
	// command again repairs the rest
	failed := false
	for _, job := range fs.Args() {
		key := scheduler.PauseKey(cfg.Namespace, job)
		errs := make([]error, len(masters))
		var wg sync.WaitGroup
		for i, m := range masters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if on {
					errs[i] = m.Set(ctx, key, "1", 0).Err()
				} else {
					errs[i] = m.Del(ctx, key).Err()
				}
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
			}
		}
		state := "paused"
		if !on {
			state = "resumed"
		}
		quorum := len(masters)/2 + 1
		switch {
		case ok == len(masters):
			fmt.Fprintf(stdout, "%s %s\n", job, state)
			continue
		case ok >= quorum:
			fmt.Fprintf(stdout, "%s %s (on %d of %d lock masters: in effect; run the command again to repair the rest)\n", job, state, ok, len(masters))
		default:
			fmt.Fprintf(stderr, "baton %s: job %q: written to %d of %d lock masters, %d needed: NOT %s; run the command again\n", name, job, ok, len(masters), quorum, state)
		}
		failed = true
		for i, err := range errs {
			if err != nil {
				fmt.Fprintf(stderr, "baton %s: job %q: lock master %d: %v\n", name, job, i, err)
			}
		}
	}
	if failed {
		return 1
	}
	return 0
}

// lockMasters opens a client per lock master of cfg (locking.masters, else
// the queue Redis).
func lockMasters(cfg *config.Config) ([]redis.UniversalClient, func(), error) {
	out, err := wiring.DialMasters(cfg)
	if err != nil {
		return nil, nil, err
	}
	if len(out) == 0 {
		q, _, err := wiring.QueueRedis(cfg)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, q)
	}
	return out, func() { wiring.CloseAll(out) }, nil
}
