package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/scheduler"
)

// Rolling deploys: a task of a job this replica does not run goes back to
// the queue for a replica that does (roster.Runs decides who), and the
// worker's heartbeat keeps this replica in the roster.

// ErrRunsElsewhere is what the worker returns for a task it cannot run (its job
// is not in this replica's job list, or not in cron mode) while a live
// replica can: asynq puts the task back after elsewhereRetry without
// counting an attempt, and a replica that knows the job runs it. It happens
// during rolling deploys, when replicas with different job lists run side by
// side.
var ErrRunsElsewhere = errors.New("jobs: handed back to a replica that can run it")

// elsewhereRetry is how long a handed-back task waits before a worker may
// fetch it again.
const elsewhereRetry = time.Second

// cannotRun decides what happens to a task this replica cannot run (job is
// nil when the job is not in its list): handed back while a live replica's
// worker can run it (its list has the job in cron mode and it consumes the
// task's queue), archived when none can. The roster is read fresh: a
// replica that just started with the job must not be missed.
func (w *Worker) cannotRun(ctx context.Context, t scheduler.Tick, job *config.Job) error {
	why := "not in this replica's job list"
	if job != nil {
		why = fmt.Sprintf("mode %s in this replica's job list", job.Mode)
	}
	asynqQueue, _ := asynq.GetQueueName(ctx)
	queue, _ := w.cfg.QueueOf(asynqQueue)
	if w.roster == nil {
		// a worker without a Redis client (not started) cannot ask
		w.count(t.Job, func(c *counters) { c.failed.Add(1) })
		w.log.Error("dropping a task of an unknown job", append(handoff.TickAttrs(t), slog.String("why", why))...)
		return fmt.Errorf("jobs: %s: job %q is %s: %w", t.ID(), t.Job, why, asynq.SkipRetry)
	}
	can, undecided, err := w.roster.Runners(ctx, t.Job, queue)
	if err != nil {
		w.log.Warn("cannot run this task here and cannot read the roster: handing it back", append(handoff.TickAttrs(t),
			slog.String("why", why), slog.Any("error", err))...)
		return fmt.Errorf("jobs: %s: job %q is %s; roster unreadable: %w: %w", t.ID(), t.Job, why, err, ErrRunsElsewhere)
	}
	if undecided {
		// no verdict off a stepped clock: decided after a heartbeat round
		w.log.Warn("cannot run this task here, and the queue Redis's clock stepped: handing it back until every live replica has beaten under the new clock",
			append(handoff.TickAttrs(t), slog.String("why", why), slog.String("queue", queue))...)
		return fmt.Errorf("jobs: %s: job %q is %s; the queue Redis's clock stepped, no replica is taken as dead for %s: %w",
			t.ID(), t.Job, why, roster.StepSuspend, ErrRunsElsewhere)
	}
	if len(can) == 0 {
		w.count(t.Job, func(c *counters) { c.failed.Add(1) })
		w.log.Error("archiving a task no live replica can run: its job is in no live replica's job list in cron mode on its queue",
			append(handoff.TickAttrs(t), slog.String("queue", queue), slog.String("why", why))...)
		return fmt.Errorf("jobs: %s: job %q is %s, and no live replica runs it from queue %q: %w",
			t.ID(), t.Job, why, queue, asynq.SkipRetry)
	}
	if _, logged := w.handing.LoadOrStore(t.Job, true); !logged {
		w.log.Info("handing tasks of a job this replica cannot run back to replicas that can (rolling deploy?)",
			slog.String("job", t.Job), slog.String("why", why), slog.String("queue", queue), slog.Any("can", can))
	}
	return fmt.Errorf("jobs: %s: job %q is %s; %s can run it: %w", t.ID(), t.Job, why, strings.Join(can, ", "), ErrRunsElsewhere)
}

// RoutedDifferently reports whether a live replica's job list, as of the
// last roster heartbeat, has job in another mode or queue than this
// replica's (a rolling deploy that moves it). For WithMovingJobs.
func (w *Worker) RoutedDifferently(job string) bool {
	w.mu.Lock()
	r := w.roster
	w.mu.Unlock()
	return r != nil && r.RoutedDifferently(job)
}

// startRoster publishes this replica in the roster and starts its
// heartbeat (see roster.Heartbeat).
func (w *Worker) startRoster() {
	var queues []string
	if !w.localOnly {
		queues = slices.Sorted(maps.Keys(w.cfg.Worker.Queues))
	}
	w.roster = roster.New(w.rdb, w.cfg, roster.Member{ID: w.replica, Version: w.version, Role: w.role, Queues: queues}, w.log)
	w.heartbeat = w.roster.Start(w.clock)
}

// stopRoster stops the heartbeat; leave also removes the replica from the
// roster at once (a graceful stop).
func (w *Worker) stopRoster(leave bool) {
	if w.heartbeat != nil {
		w.heartbeat.Stop(leave)
		w.heartbeat = nil
	}
}
