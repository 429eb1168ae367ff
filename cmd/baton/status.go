package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

const statusHelp = `usage: baton status [--config FILE]

Shows every singleton job's holder (replica id), since when it holds the
job, and its fencing token; which jobs are paused (by the config, or by
baton pause on a majority of lock masters); and the replicas: id, role,
version, job list hash, last heartbeat. When live replicas run different
job lists (during a rolling deploy) it lists the jobs they differ on and
which replicas have which definition.

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
	locks, err := locking.New(masters, wiring.LockOptions(cfg)...)
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
			fmt.Fprintf(tw, "%s\t%q\t%s (%s ago)\t%d\n", h.Job, h.Leader.ID, h.Leader.Since.UTC().Format(time.RFC3339),
				time.Since(h.Leader.Since).Round(time.Second), h.Leader.Fence)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintln(tw, "JOB\tMODE\tPAUSED")
	for _, j := range cfg.Jobs {
		if j.Mode == config.ModeSingleton {
			continue
		}
		paused := "no"
		if j.Paused {
			paused = "yes (config)"
		} else {
			on, answered := 0, 0
			var last error
			for _, m := range masters {
				n, err := m.Exists(ctx, scheduler.PauseKey(cfg.Namespace, j.Name)).Result()
				if err != nil {
					last = err
					continue
				}
				answered++
				on += int(n)
			}
			quorum := len(masters)/2 + 1
			switch {
			case answered < quorum:
				fmt.Fprintf(stderr, "baton status: %d of %d lock masters answer, %d needed: %v\n", answered, len(masters), quorum, last)
				return 1
			case on >= quorum:
				paused = "yes (baton pause)"
			case on > 0:
				paused = fmt.Sprintf("no (paused on %d of %d lock masters: run baton pause or resume again)", on, len(masters))
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", j.Name, j.Mode, paused)
	}
	_ = tw.Flush()
	if code := printReplicas(ctx, cfg, stdout, stderr); code != 0 {
		return code
	}
	return 0
}

// printReplicas prints the roster: every replica seen in the last
// jobs.RosterForget, and the jobs on which live replicas' lists differ.
func printReplicas(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	queue, _, err := wiring.QueueRedis(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "baton status: %v\n", err)
		return 2
	}
	defer queue.Close()
	members, err := jobs.ReadRoster(ctx, queue, cfg.Namespace)
	if err != nil {
		fmt.Fprintf(stderr, "baton status: queue Redis %s: %v\n", wiring.DescribeRedis(cfg), err)
		return 1
	}
	fmt.Fprintln(stdout)
	defer warnOrphanQueues(cfg, queue, members, stdout)
	if len(members) == 0 {
		fmt.Fprintln(stdout, "REPLICAS: none seen in the last", jobs.RosterForget)
		return 0
	}
	diffs := jobs.DiffLists(members)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tROLE\tVERSION\tJOB LIST\tLAST SEEN\tQUEUES")
	for _, m := range members {
		seen := time.Since(m.Seen).Round(time.Second).String() + " ago"
		if !m.Live {
			seen += " (gone)"
		}
		// everything but the times was read from Redis: quoted, escaped
		qs := make([]string, len(m.Queues))
		for i, q := range m.Queues {
			qs[i] = redact.Quote(q)
		}
		queues := strings.Join(qs, ",")
		if queues == "" {
			queues = "-"
		}
		fmt.Fprintf(tw, "%q\t%q\t%q\t%q\t%s\t%s\n", m.ID, m.Role, m.Version, m.Hash, seen, queues)
	}
	_ = tw.Flush()
	if len(diffs) > 0 {
		fmt.Fprintf(stdout, "\nlive replicas run different job lists; they differ on %d jobs (definition: mode queue digest):\n", len(diffs))
		for _, d := range diffs {
			fmt.Fprintf(stdout, "  %s\n", d)
		}
	}
	return 0
}

// warnOrphanQueues points out tasks waiting in a queue no live replica
// consumes: they wait forever (a job moved to another queue while its old
// queue still held tasks, or a queue dropped from worker.queues).
func warnOrphanQueues(cfg *config.Config, queue redis.UniversalClient, members []jobs.Member, stdout io.Writer) {
	consumed := map[string]bool{}
	for _, m := range members {
		for _, q := range m.Queues {
			if m.Live {
				consumed[cfg.QueueName(q)] = true
			}
		}
	}
	insp := asynq.NewInspectorFromRedisClient(queue)
	if names, err := insp.Queues(); err == nil {
		for _, q := range names {
			if consumed[q] || !strings.HasPrefix(q, cfg.Namespace+":") {
				continue // consumed, or another deployment's
			}
			if info, err := insp.GetQueueInfo(q); err == nil && info.Pending+info.Scheduled+info.Retry > 0 {
				fmt.Fprintf(stdout, "\nqueue %q holds %d pending, %d scheduled and %d retry tasks, but no live replica consumes it: add it to worker.queues\n",
					q, info.Pending, info.Scheduled, info.Retry)
			}
		}
	}
}
