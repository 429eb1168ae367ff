package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

const statusHelp = `usage: baton status [--config FILE]

Shows every singleton job's holder (replica id), since when it holds the
job, and its fencing token; and which jobs are paused (by the config or by
baton pause).

Exit status: 0 done; 1 Redis unreachable; 2 usage error.

flags:
`

// runStatus implements "baton status".
func runStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status")
	var path string
	fs.stringEnv(&path, "config", envConfig, defaultConfigFile, "config `FILE`")
	if err := fs.parse(args, statusHelp, stdout); err != nil {
		return exitParse("status", err, stderr)
	}
	if fs.NArg() > 0 {
		return usageExit("status", usagef("unexpected argument %q", fs.Arg(0)), stderr)
	}
	cfg, err := loadConfigFile(fs, path)
	if err != nil {
		return usageExit("status", err, stderr) // config errors: one line each
	}
	masters, closeAll, err := lockMasters(cfg)
	if err != nil {
		return usageExit("status", err, stderr)
	}
	defer closeAll()
	locks, err := locking.New(masters, locking.WithPrefix(cfg.Namespace+":lock:"),
		locking.WithRestartQuarantine(cfg.Locking.RestartQuarantine), freshOpt(cfg))
	if err != nil {
		return usageExit("status", err, stderr)
	}
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	holders, err := jobs.NewSingletons(cfg, locks, nil).Holders(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "baton status: %v\n", err)
		return 1
	}
	if len(holders) > 0 {
		fmt.Fprintln(tw, "SINGLETON\tHOLDER\tSINCE\tFENCE")
		for _, h := range holders {
			if !h.Leading {
				fmt.Fprintf(tw, "%s\t-\t-\t-\n", h.Job)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s (%s ago)\t%d\n", h.Job, h.Leader.ID, h.Leader.Since.UTC().Format(time.RFC3339),
				time.Since(h.Leader.Since).Round(time.Second), h.Leader.Fence)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "JOB\tMODE\tPAUSED")
	for _, j := range cfg.Jobs {
		if j.Mode == jobs.ModeSingleton {
			continue
		}
		paused := "no"
		if j.Paused {
			paused = "yes (config)"
		} else {
			n, err := masters[0].Exists(ctx, scheduler.PauseKey(cfg.Namespace, j.Name)).Result()
			if err != nil {
				fmt.Fprintf(stderr, "baton status: lock master: %v\n", err)
				return 1
			}
			if n == 1 {
				paused = "yes (baton pause)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", j.Name, j.Mode, paused)
	}
	_ = tw.Flush()
	return 0
}
