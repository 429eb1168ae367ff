package worker

import (
	"context"
	"encoding/json"
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
	"github.com/batonhq/baton/internal/schedstore"
	"github.com/batonhq/baton/jobs"
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

// listWhy says why a job of the job list cannot run here: job is nil when
// it is not in this replica's list.
func listWhy(job *config.Job) string {
	if job == nil {
		return "not in this replica's job list"
	}
	return fmt.Sprintf("mode %s in this replica's job list", job.Mode)
}

// cannotRun decides what happens to task t this replica cannot run, and
// why not: handed back while a live replica's worker can run it (Runs:
// for a job of the list, its list has the job in cron mode; for a runtime
// schedule, it has the job's Go handler or allows its URL; and it consumes
// the task's queue), archived with a record in the history when none can.
// The roster is read fresh: a replica that just started with the job must
// not be missed.
func (w *Worker) cannotRun(ctx context.Context, t scheduler.Tick, task roster.Task, why string) error {
	asynqQueue, _ := asynq.GetQueueName(ctx)
	queue, _ := w.cfg.QueueOf(asynqQueue)
	if w.roster == nil {
		// a worker without a Redis client (not started) cannot ask
		w.count(t.Job, func(c *counters) { c.failed.Add(1) })
		w.log.Error("dropping a task of an unknown job", append(handoff.TickAttrs(t), slog.String("why", why))...)
		return fmt.Errorf("jobs: %s: job %q is %s: %w", t.ID(), t.Job, why, asynq.SkipRetry)
	}
	can, undecided, err := w.roster.Runners(ctx, task, queue)
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
		what := "its job is in no live replica's job list in cron mode on its queue"
		if config.IsScheduleJob(t.Job) {
			what = "no live replica that consumes its queue has its Go handler or allows its URL"
		}
		return w.archiveUnrunnable(ctx, t, fmt.Sprintf("job %q is %s, and no live replica runs it from queue %q", t.Job, why, queue),
			"archiving a task no live replica can run: "+what, slog.String("queue", queue), slog.String("why", why))
	}
	if _, logged := w.handing.LoadOrStore(t.Job, true); !logged {
		w.log.Info("handing tasks of a job this replica cannot run back to replicas that can (rolling deploy?)",
			slog.String("job", t.Job), slog.String("why", why), slog.String("queue", queue), slog.Any("can", can))
	}
	return fmt.Errorf("jobs: %s: job %q is %s; %s can run it: %w", t.ID(), t.Job, why, strings.Join(can, ", "), ErrRunsElsewhere)
}

// archiveUnrunnable archives task t, which no replica can run, with a
// line in the log (msg, attrs) and a record in the job's history (refused,
// reason), and counts it failed.
func (w *Worker) archiveUnrunnable(ctx context.Context, t scheduler.Tick, reason, msg string, attrs ...slog.Attr) error {
	w.count(t.Job, func(c *counters) { c.failed.Add(1) })
	args := handoff.TickAttrs(t)
	for _, a := range attrs {
		args = append(args, a)
	}
	w.log.Error(msg, args...)
	w.hist().refused(ctx, t, reason)
	w.observe(RunObservation{Job: t.Job, Status: jobs.StatusRefused})
	return fmt.Errorf("jobs: %s: %s: %w", t.ID(), reason, asynq.SkipRetry)
}

// routeSchedule decides whether this replica runs task t of a runtime
// schedule, whose job, as this replica finds it, is job (nil: none): nil
// when it does; else what cannotRun says (handed back to a replica that
// has the job's Go handler or allows its URL, or archived), or, when the
// schedule is deleted, the task archived with a record.
func (w *Worker) routeSchedule(ctx context.Context, t scheduler.Tick, job *config.Job) error {
	if job != nil {
		if job.Handler != nil && !w.hasHandler(job.Handler.Name) {
			return w.cannotRun(ctx, t, roster.TaskOf(job), fmt.Sprintf("a runtime schedule whose Go handler %q this replica does not register", job.Handler.Name))
		}
		return nil
	}
	// not found here: deleted, or a definition this replica's config refuses
	id, _ := config.ScheduleID(t.Job)
	rec, err := schedstore.Of(w.rdb, w.cfg).Get(ctx, id)
	var corrupt *schedstore.CorruptError
	switch {
	case errors.Is(err, schedstore.ErrNotFound):
		return w.archiveUnrunnable(ctx, t, "its runtime schedule was deleted", "archiving a task of a runtime schedule that was deleted")
	case errors.As(err, &corrupt) || errors.Is(err, handoff.ErrUnsigned) || errors.Is(err, handoff.ErrBadSignature):
		return w.archiveUnrunnable(ctx, t, "its runtime schedule cannot be read: "+err.Error(),
			"archiving a task of a runtime schedule whose stored definition cannot be read", slog.Any("error", err))
	case err != nil:
		w.log.Warn("cannot read the definition of this task's runtime schedule: handing the task back", append(handoff.TickAttrs(t),
			slog.Any("error", err))...)
		return fmt.Errorf("jobs: %s: %w: %w", t.ID(), err, ErrRunsElsewhere)
	}
	why := "a runtime schedule this replica's config refuses"
	if _, err := config.DecodeSchedule(w.cfg, id, rec.Doc, rec.Created); err != nil {
		why += ": " + err.Error()
	}
	var needs struct {
		Handler struct {
			Name string `json:"name"`
		} `json:"handler"`
		HTTP struct {
			URL string `json:"url"`
		} `json:"http"`
	}
	_ = json.Unmarshal(rec.Doc, &needs) // a doc that does not say: no replica runs it
	return w.cannotRun(ctx, t, roster.Task{Job: t.Job, Handler: needs.Handler.Name, URL: needs.HTTP.URL}, why)
}

// hasHandler reports whether this worker's executor runs Go handler name
// (WithHandlers).
func (w *Worker) hasHandler(name string) bool {
	if w.handlers == nil {
		return false
	}
	_, ok := w.handlers.Lookup(name)
	return ok
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
	var handlers []string
	if w.handlers != nil {
		handlers = w.handlers.Names()
	}
	w.roster = roster.New(w.rdb, w.cfg, roster.Member{ID: w.replica, Version: w.version, Role: w.role, Queues: queues,
		Handlers: handlers}, w.log)
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
