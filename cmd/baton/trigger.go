package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/user"
	"time"

	"github.com/batonhq/baton/internal/redact"
)

const triggerHelp = `usage: baton trigger [--config FILE] [--by NAME] JOB...

Runs each JOB once now, by hand: the run goes through the same dispatch
path as a scheduled tick (signed, enqueued, run by a worker under the job's
concurrency policy: forbid skips it while the job runs, replace stops the
running one) with its own run id, and baton history shows it as manual. A
paused job runs too. Only cron jobs can be triggered: local jobs run inside
a scheduler replica and singletons run all the time.

Exit status: 0 every job dispatched; 1 Redis unreachable or a dispatch
failed; 2 usage error (unknown job, not a cron job, bad config).

flags:
`

// triggerOpts are the flags of "baton trigger".
type triggerOpts struct {
	path string
	by   string
}

// defineTrigger defines the flags of "baton trigger".
func defineTrigger(fs *flagSet) *triggerOpts {
	o := &triggerOpts{}
	fs.configFlag(&o.path)
	fs.StringVar(&o.by, "by", "", "who triggers, as the history records it (default: user@host)")
	return o
}

// runTrigger implements "baton trigger".
func runTrigger(fs *flagSet, o *triggerOpts, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return usageExit("trigger", usagef("name at least one job"), stderr)
	}
	by := o.by
	if !fs.isSet("by") {
		by = defaultActor()
	}
	c, exit := openCluster(fs, o.path, "trigger", stderr)
	if c == nil {
		return exit
	}
	defer c.Close()
	for _, job := range args {
		j, ok := c.Config().Job(job)
		if !ok {
			return usageExit("trigger", noJob(c, job, o.path), stderr)
		}
		if j.Mode != "cron" {
			return usageExit("trigger", usagef("job %q is a %s job: only cron jobs can be triggered", job, j.Mode), stderr)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, job := range args {
		t, err := c.Trigger(ctx, job, by)
		if err != nil {
			printf(stderr, "baton trigger: %s: %s\n", job, errors.New(c.Config().MaskSecrets(err.Error())))
			return 1
		}
		printf(stdout, "%s triggered: run %s, tick %s, by %s\n", job, t.RunID, t.At.UTC().Format(triggerTickFormat), redact.Quote(t.Replica))
	}
	return 0
}

// defaultActor is "user@host" of this process, for records of manual
// actions.
func defaultActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	return name + "@" + host
}

// triggerTickFormat prints a trigger's tick to the millisecond, as it is.
const triggerTickFormat = "2006-01-02T15:04:05.000Z07:00"
