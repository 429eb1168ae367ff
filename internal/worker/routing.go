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
	"github.com/batonhq/baton/internal/formats"
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
var ErrRunsElsewhere = errors.New("worker: handed back to a replica that can run it")

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
		return fmt.Errorf("worker: %s: job %q is %s: %w", t.ID(), t.Job, why, asynq.SkipRetry)
	}
	can, undecided, err := w.roster.Runners(ctx, task, queue)
	if err != nil {
		w.log.Warn("cannot run this task here and cannot read the roster: handing it back", append(handoff.TickAttrs(t),
			slog.String("why", why), slog.Any("error", err))...)
		return fmt.Errorf("worker: %s: job %q is %s; roster unreadable: %w: %w", t.ID(), t.Job, why, err, ErrRunsElsewhere)
	}
	if undecided {
		// no verdict off a stepped clock: decided after a heartbeat round
		w.log.Warn("cannot run this task here, and the queue Redis's clock stepped: handing it back until every live replica has beaten under the new clock",
			append(handoff.TickAttrs(t), slog.String("why", why), slog.String("queue", queue))...)
		return fmt.Errorf("worker: %s: job %q is %s; the queue Redis's clock stepped, no replica is taken as dead for %s: %w",
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
	return fmt.Errorf("worker: %s: job %q is %s; %s can run it: %w", t.ID(), t.Job, why, strings.Join(can, ", "), ErrRunsElsewhere)
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
	return fmt.Errorf("worker: %s: %s: %w", t.ID(), reason, asynq.SkipRetry)
}

// routeSchedule decides whether this replica runs task t of a runtime
// schedule, dispatched for definition def (zero: by a dispatcher that does
// not say), and with which job: held is the job as this replica's copy
// holds it (nil: none); exp is the task's signed expiry (unix ms; 0: none).
// The job is held when it is def (or def is not said); else the stored
// definition decides (scheduleDefinition). It returns the job to run, or
// what cannotRun says (handed back to a replica that has the job's Go
// handler or allows its URL, or archived), or the task archived with a
// record when its definition is gone.
func (w *Worker) routeSchedule(ctx context.Context, t scheduler.Tick, held *config.Job, def config.ScheduleRef, exp int64) (*config.Job, error) {
	job := held
	if job == nil || !def.IsZero() && job.Ref != def {
		var err error
		if job, err = w.scheduleDefinition(ctx, t, held, def, exp); err != nil {
			return nil, err
		}
	}
	if job.Handler != nil && !w.hasHandler(job.Handler.Name) {
		return nil, w.cannotRun(ctx, t, roster.TaskOf(job), fmt.Sprintf("a runtime schedule whose Go handler %q this replica does not register", job.Handler.Name))
	}
	return job, nil
}

// scheduleDefinition reads the stored definition of task t's runtime
// schedule, which this replica's copy does not hold as def (held: what it
// holds, nil: nothing), and decides:
//
//   - the stored definition is def (or def is not said): the tick runs
//     with it, whatever the copy holds (a copy behind a replace never runs
//     a tick with the definition before);
//   - it replaced def (same schedule, a later version): the tick runs with
//     it when it has the tick, or the tick is a trigger, as if the
//     dispatcher had seen the replacement (a tick the two definitions share
//     runs once, with the newer); else the task is archived with a record,
//     as def is gone and the definition in force does not have the tick;
//   - the schedule was deleted since (and maybe put again): archived with a
//     record;
//   - the store is behind def (it went back; a replica puts it back): handed
//     back until it is not, or archived with a record once the task expired
//     (exp, unix ms; without one, the bound of the job's ticks);
//   - a definition this replica's config refuses: what cannotRun says.
func (w *Worker) scheduleDefinition(ctx context.Context, t scheduler.Tick, held *config.Job, def config.ScheduleRef, exp int64) (*config.Job, error) {
	id, _ := config.ScheduleID(t.Job)
	st := schedstore.Of(w.rdb, w.cfg)
	if len(w.masters) > 0 {
		st.WithMarks(schedstore.NewMasterMarks(w.masters, w.cfg.Namespace))
	}
	rec, err := st.Get(ctx, id)
	if err == nil {
		err = st.Older(ctx, rec)
	}
	var corrupt *schedstore.CorruptError
	var older *schedstore.OlderError
	switch {
	case errors.As(err, &older):
		// a copy put back into the store (or an older snapshot of it):
		// the definition in force is not there until its owner puts it
		// again; as a store gone back
		if w.expired(t, exp, held, nil) {
			return nil, w.archiveUnrunnable(ctx, t, "the store holds a copy of its runtime schedule put back, older than the replicas saw, and none was put again before the task expired: "+err.Error(),
				"archiving an expired task of a runtime schedule whose store holds an older copy put back", slog.Any("error", err))
		}
		if _, logged := w.handing.LoadOrStore(t.Job+"\x00older", true); !logged {
			w.log.Warn("the store holds an older copy of this task's runtime schedule, put back: handing the task back until the schedule is put again",
				append(handoff.TickAttrs(t), slog.Any("error", err))...)
		}
		return nil, fmt.Errorf("worker: %s: %w: %w", t.ID(), err, ErrRunsElsewhere)
	case errors.Is(err, schedstore.ErrNotFound):
		return nil, w.archiveUnrunnable(ctx, t, "its runtime schedule was deleted", "archiving a task of a runtime schedule that was deleted")
	case errors.As(err, &corrupt) || errors.Is(err, handoff.ErrUnsigned) || errors.Is(err, handoff.ErrBadSignature):
		return nil, w.archiveUnrunnable(ctx, t, "its runtime schedule cannot be read: "+err.Error(),
			"archiving a task of a runtime schedule whose stored definition cannot be read", slog.Any("error", err))
	case err != nil:
		w.log.Warn("cannot read the definition of this task's runtime schedule: handing the task back", append(handoff.TickAttrs(t),
			slog.Any("error", err))...)
		return nil, fmt.Errorf("worker: %s: %w: %w", t.ID(), err, ErrRunsElsewhere)
	}
	stored := rec.Ref()
	// with the runtime calendars it names, read from the store as it is
	base, badCals, err := st.ReadableCalendarsOf(ctx, w.cfg, nil, rec.Doc)
	if err != nil {
		w.log.Warn("cannot read the calendars this task's runtime schedule names: handing the task back", append(handoff.TickAttrs(t),
			slog.Any("error", err))...)
		return nil, fmt.Errorf("worker: %s: %w: %w", t.ID(), err, ErrRunsElsewhere)
	}
	if err := schedstore.CalendarErrorOf(badCals, rec.Doc); err != nil {
		// a calendar put back older, or stored unreadable: it may be put
		// again (a replica's copy puts an older one back), so the task
		// waits for it, until it expires
		if w.expired(t, exp, held, nil) {
			return nil, w.archiveUnrunnable(ctx, t, "a calendar its runtime schedule names cannot be used, and was not put again before the task expired: "+err.Error(),
				"archiving an expired task of a runtime schedule whose calendar cannot be used", slog.Any("error", err))
		}
		if _, logged := w.handing.LoadOrStore(t.Job+"\x00calendar", true); !logged {
			w.log.Warn("a calendar this task's runtime schedule names cannot be used: handing the task back until it is put again or the task expires",
				append(handoff.TickAttrs(t), slog.Any("error", err))...)
		}
		return nil, fmt.Errorf("worker: %s: %w: %w", t.ID(), err, ErrRunsElsewhere)
	}
	job, decodeErr := rec.Job(base)
	switch {
	case def.IsZero() || stored == def:
		// run with it, if this replica's config takes it
	case stored.Created.After(def.Created):
		return nil, w.archiveUnrunnable(ctx, t, fmt.Sprintf("its runtime schedule was deleted since it was dispatched for definition %s (the id was put again: %s)", def, stored),
			"archiving a task of a runtime schedule deleted since its dispatch", slog.String("def", def.String()), slog.String("stored", stored.String()))
	case stored.Created.Before(def.Created) || stored.Version < def.Version:
		// the store holds less than the dispatcher read: it went back
		// (an empty restart, an older snapshot) and a replica's copy puts
		// it back, unless none does before the task expires
		if w.expired(t, exp, held, job) {
			return nil, w.archiveUnrunnable(ctx, t, fmt.Sprintf("it was dispatched for definition %s of its runtime schedule, the store holds %s (it went back), and no replica put the definition back before the task expired", def, stored),
				"archiving an expired task of a runtime schedule whose store went back", slog.String("def", def.String()), slog.String("stored", stored.String()))
		}
		if _, logged := w.handing.LoadOrStore(t.Job+"\x00behind", true); !logged {
			w.log.Warn("a task names a definition of its runtime schedule newer than the store holds (did the queue Redis go back?): handing it back until a replica puts the schedules back",
				append(handoff.TickAttrs(t), slog.String("def", def.String()), slog.String("stored", stored.String()))...)
		}
		return nil, fmt.Errorf("worker: %s: dispatched for definition %s, the store holds %s: %w", t.ID(), def, stored, ErrRunsElsewhere)
	case decodeErr == nil && (t.Manual || scheduledAt(job, t.At)):
		// replaced since the dispatch by a definition that has the tick
		// (a trigger is on no schedule's course): run as a dispatcher
		// that had seen the replacement would have
		w.log.Info("running a tick dispatched for a replaced definition with the one that replaced it, which has the tick",
			append(handoff.TickAttrs(t), slog.String("def", def.String()), slog.String("stored", stored.String()))...)
	case decodeErr == nil:
		return nil, w.archiveUnrunnable(ctx, t, fmt.Sprintf("its runtime schedule's definition %s was replaced by %s (at %s), which does not have the tick",
			def, stored, rec.Updated.UTC().Format(time.RFC3339Nano)),
			"archiving a task of a runtime schedule whose definition was replaced since its dispatch by one without its tick", slog.String("def", def.String()), slog.String("stored", stored.String()))
	}
	if decodeErr != nil {
		var needs struct {
			Handler struct {
				Name string `json:"name"`
			} `json:"handler"`
			HTTP struct {
				URL string `json:"url"`
			} `json:"http"`
		}
		_ = json.Unmarshal(rec.Doc, &needs) // a doc that does not say: no replica runs it
		return nil, w.cannotRun(ctx, t, roster.Task{Job: t.Job, Handler: needs.Handler.Name, URL: needs.HTTP.URL},
			"a runtime schedule this replica's config refuses: "+decodeErr.Error())
	}
	if held != nil {
		if _, logged := w.handing.LoadOrStore(t.Job+"\x00copy behind", true); !logged {
			w.log.Info("running a tick with its runtime schedule's stored definition, which this replica's copy does not hold yet",
				append(handoff.TickAttrs(t), slog.String("def", stored.String()), slog.String("copy", held.Ref.String()))...)
		}
	}
	return job, nil
}

// expired reports whether task t, of signed expiry exp (unix ms; 0: none),
// may no longer start by this worker's clock. Without exp, the tick's
// bound is the job's (held, else stored; nil: none), as admit reads it.
func (w *Worker) expired(t scheduler.Tick, exp int64, held, stored *config.Job) bool {
	job := held
	if job == nil {
		job = stored
	}
	if exp <= 0 && job == nil {
		return false
	}
	until := expiryOf(w.cfg, job, t, exp)
	return !until.IsZero() && w.clock.Now().After(until)
}

// scheduledAt reports whether job's schedule has a tick at at.
func scheduledAt(job *config.Job, at time.Time) bool {
	if job.Sched == nil {
		return false
	}
	return job.Sched.Next(at.Add(-time.Nanosecond)).Equal(at)
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
func (w *Worker) startRoster(ctx context.Context) error {
	var queues []string
	if !w.localOnly {
		queues = slices.Sorted(maps.Keys(w.cfg.Worker.Queues))
	}
	var handlers []string
	if w.handlers != nil {
		handlers = w.handlers.Names()
	}
	r := roster.New(w.rdb, w.cfg, roster.Member{ID: w.replica, Version: w.version, Role: w.role, Queues: queues,
		Handlers: handlers}, w.log)
	w.mu.Lock() // RoutedDifferently reads it under w.mu
	w.roster = r
	w.mu.Unlock()
	w.heartbeat = r.Heartbeat(w.clock)
	_ = w.heartbeat.Start(ctx) // a first beat that fails is retried by the next
	return nil
}

// stopRoster stops the heartbeat, which removes the replica from the
// roster at once; a failed removal leaves its entry to expire.
func (w *Worker) stopRoster(ctx context.Context) error {
	if err := w.heartbeat.Stop(ctx); err != nil {
		w.log.Debug("cannot leave the roster; its entry expires", slog.Any("error", err))
	}
	return nil
}

// newerFormat decides what happens to a task whose payload is of a format
// version newer than this replica reads: a newer replica dispatched it,
// and this one must not misread it. It goes back to the queue, without
// spending an attempt, for a replica that reads it (said once per process
// and version: upgrade this replica), until the expiry the payload names
// (exp, unix ms; 0: none) has passed: then it is archived, with a record.
func (w *Worker) newerFormat(ctx context.Context, e *handoff.NewerFormatError, exp int64) error {
	t := e.Tick
	why := "before it expired"
	if exp <= 0 {
		// a payload that names no expiry (every release since expiries
		// names one): bounded by its tick, as a job without a timeout's
		// ledger record is, or not at all when it names none either
		why = fmt.Sprintf("within %v of its tick (it names no expiry)", unboundedRecord)
		if !t.At.IsZero() {
			exp = t.At.Add(unboundedRecord).UnixMilli()
		}
	}
	if exp <= 0 || w.clock.Now().UnixMilli() > exp {
		return w.archiveUnrunnable(ctx, t, fmt.Sprintf("its payload is of format version %d, newer than this replica reads (%d), and no replica that reads it ran it %s",
			e.Version, formats.TaskPayload, why), "archiving an expired task of a newer format than this replica reads", slog.Int("format", e.Version))
	}
	if _, logged := w.handing.LoadOrStore(fmt.Sprintf("\x00format %d", e.Version), true); !logged {
		w.log.Warn("a task's payload is of a format newer than this replica reads: handing it back for a newer replica; upgrade this replica",
			append(handoff.TickAttrs(t), slog.String("format", "task payload"), slog.Int("version", e.Version), slog.Int("reads", formats.TaskPayload))...)
	}
	return fmt.Errorf("%w: %w", e, ErrRunsElsewhere)
}
