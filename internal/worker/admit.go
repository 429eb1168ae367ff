package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// This file decides whether a queued task's tick may still run. A writer to
// the queue Redis can put any message back into a queue (a finished task's
// copy, once asynq's retained task and with it the task ID are gone), and a
// signature only says that a replica of this deployment made the message,
// not that it is new. So before a task runs, the worker checks, in order:
//
//  1. its age: a task runs no later than its expiry, signed into the payload
//     by the dispatcher (dispatch instant + runWindow), or, for a payload
//     without one, its tick + starting_deadline + runWindow (tickBound);
//  2. the tick's ledger record on the queue Redis (readTickRecord): a tick
//     whose task ended for good (ran, skipped, replaced, archived, refused)
//     is "done" and never runs again;
//  3. the job's pause (a scheduled task only: a trigger runs a paused job):
//     paused in this replica's job list, or its pause flag held by a
//     majority of the lock masters (WithLockMasters), as the claim decides;
//  4. the job's limits (a scheduled task only): start, end, at and max_runs.
//
// A task that fails a check is refused: recorded in the history as
// "refused" with the reason, counted by reason (Worker.Refusals), and
// archived (not retried). A limit this replica's job list sets while a live
// replica's list defines the job differently (a rolling deploy) hands the
// task back instead, so a replica with the newer list can run it; the age
// bound ends that.
//
// Redis names (NS is Config.Namespace), on the queue Redis:
//
//	NS:{<job>}:tickrec:<tick ID>  the tick's ledger record: "done:<run id>"
//	                              once its task ended for good; expires
//	                              (PX, by the worker's clock) at its task's
//	                              expiry + 2 x max_clock_skew

// RefusalReason says why a worker refused a task. The values are few and
// fixed (a Prometheus label).
type RefusalReason string

// The reasons a worker refuses a task.
const (
	// RefusedBadTask: unsigned or forged, malformed, another namespace's,
	// or in another queue than it was signed for.
	RefusedBadTask RefusalReason = "bad_task"
	// RefusedTooOld: past its expiry (tickBound or the signed one).
	RefusedTooOld RefusalReason = "too_old"
	// RefusedDone: the tick's ledger record says its task ended already.
	RefusedDone RefusalReason = "done"
	// RefusedPaused: the job is paused.
	RefusedPaused RefusalReason = "paused"
	// RefusedJobDone: the job takes no more ticks: past its end, not its
	// one-shot tick (at), or it ran its max_runs ticks.
	RefusedJobDone RefusalReason = "job_done"
	// RefusedOutsideWindow: the tick is before the job's start.
	RefusedOutsideWindow RefusalReason = "outside_window"
)

// refusalReasons lists every RefusalReason, in the order of refusalCounts.
var refusalReasons = []RefusalReason{RefusedBadTask, RefusedTooOld, RefusedDone, RefusedPaused, RefusedJobDone, RefusedOutsideWindow}

// refusalCounts counts refusals by reason (index in refusalReasons).
type refusalCounts [6]atomic.Uint64

func (r *refusalCounts) add(reason RefusalReason) {
	for i, x := range refusalReasons {
		if x == reason {
			r[i].Add(1)
			return
		}
	}
}

// Refusals returns how many tasks this worker refused since it was made, by
// reason (every reason, zeros included).
func (w *Worker) Refusals() map[RefusalReason]uint64 {
	out := make(map[RefusalReason]uint64, len(refusalReasons))
	for i, r := range refusalReasons {
		out[r] = w.refusals[i].Load()
	}
	return out
}

// unboundedRecord is how long the ledger record of a tick of a job without
// a timeout (no age bound) is kept after its task ended.
const unboundedRecord = 24 * time.Hour

// doneMarker starts a ledger record that says the tick's task ended for
// good; what follows it (":<run id>") is information only.
const doneMarker = "done"

// readTickRecord reads tick t's ledger record and reports whether it says
// done: any value that starts with doneMarker. Every reader goes through
// here.
func readTickRecord(ctx context.Context, rdb redis.UniversalClient, ns string, t scheduler.Tick) (done bool, value string, err error) {
	return tickRecordOf(rdb.Get(ctx, tickRecordKey(ns, t)), t)
}

// tickRecordOf is readTickRecord's answer from the GET of tick t's record.
func tickRecordOf(cmd *redis.StringCmd, t scheduler.Tick) (done bool, value string, err error) {
	v, err := cmd.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, "", nil
	case err != nil:
		return false, "", fmt.Errorf("worker: read the ledger record of %s: %w", t.ID(), err)
	}
	return strings.HasPrefix(v, doneMarker), v, nil
}

// markDone writes tick t's ledger record "done": its task ended for good
// and must never run again. It expires when no copy of the task could run
// anyway: at expiry (unix ms) plus twice the clock skew bound, by this
// worker's clock. The record is given that much time to live (PX), not
// that instant (PXAT): the queue Redis's clock is not held to the
// replicas', and one ahead of them would end the record early. A failure
// is logged: the age bound still holds.
func (w *Worker) markDone(ctx context.Context, t scheduler.Tick, expiry int64) {
	ttl, ok := w.ledgerTTL(expiry)
	if w.rdb == nil || !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ledgerTimeout)
	defer cancel()
	err := w.rdb.Set(ctx, tickRecordKey(w.cfg.Namespace, t), doneMarker+":"+t.RunID, ttl).Err()
	if err != nil {
		w.log.Warn("cannot write the tick's ledger record (a replay of its task is still refused at its expiry)",
			append(handoff.TickAttrs(t), slog.Any("error", err))...)
	}
}

// ledgerTTL is how long a ledger record written now lives (see markDone);
// false when none is needed: no expiry, or past it already (no copy can
// run).
func (w *Worker) ledgerTTL(expiry int64) (time.Duration, bool) {
	if expiry <= 0 {
		return 0, false
	}
	ttl := time.UnixMilli(expiry).Add(2*w.cfg.MaxClockSkew + time.Second).Sub(w.clock.Now())
	return ttl, ttl >= time.Millisecond
}

// ledgerWrite is tick t's ledger record written by the run path with a
// successful run's end, in the round trip of its history entry (also):
// written says it landed, else the handler writes it alone (markDone).
type ledgerWrite struct {
	w       *Worker
	t       scheduler.Tick
	expiry  int64
	written bool
}

func (l *ledgerWrite) also(ctx context.Context, p redis.Pipeliner) func() {
	ttl, ok := l.w.ledgerTTL(l.expiry)
	if !ok {
		l.written = true // none is needed
		return nil
	}
	cmd := p.Set(ctx, tickRecordKey(l.w.cfg.Namespace, l.t), doneMarker+":"+l.t.RunID, ttl)
	return func() { l.written = cmd.Err() == nil }
}

// expiryOf returns the instant after which task t of job may not start:
// the signed expiry exp (unix ms) when the payload has one, else the tick
// plus tickBound; zero when there is none.
func expiryOf(cfg *config.Config, job *config.Job, t scheduler.Tick, exp int64) time.Time {
	if exp > 0 {
		return time.UnixMilli(exp)
	}
	b := handoff.TickBound(cfg, job)
	if b >= 100*365*24*time.Hour {
		return time.Time{}
	}
	return t.At.Add(b)
}

// admitted is how a task passed admit: its expiry (unix ms; 0: none), for
// the ledger record.
type admitted struct{ expiry int64 }

// admit checks whether tick t's task (exp: its signed expiry, 0 if none)
// may run now; it returns the handler's result for a task that may not:
// refused (archived) or handed back. See the top of this file.
func (w *Worker) admit(ctx context.Context, job *config.Job, t scheduler.Tick, exp int64) (admitted, error) {
	now := w.clock.Now()
	until := expiryOf(w.cfg, job, t, exp)
	a := admitted{}
	if !until.IsZero() {
		a.expiry = until.UnixMilli()
		if now.After(until) {
			return a, w.refuseTick(ctx, job, t, a, RefusedTooOld, fmt.Sprintf("too old to run: it could start until %s (tick + starting_deadline + retry window), now %s late",
				until.UTC().Format(time.RFC3339), now.Sub(until).Round(time.Second)), false)
		}
	} else {
		// no bound (a job without a timeout): the ledger record is kept
		// for unboundedRecord
		a.expiry = now.Add(unboundedRecord).UnixMilli()
	}
	if w.rdb == nil {
		return a, nil
	}
	// a trigger or a backfill is explicit: it runs a paused job, and beyond
	// its limits; a job this replica's list pauses needs no flag
	explicit := t.Manual || t.Backfill
	rd := w.readAdmission(ctx, job, t, !explicit && !job.Paused)
	done, v, err := rd.done, rd.record, rd.recordErr
	switch {
	case err != nil:
		w.log.Warn("cannot read the tick's ledger record: running the task", append(handoff.TickAttrs(t), slog.Any("error", err))...)
	case done && v == doneMarker+":"+t.RunID && retriedOf(ctx) > 0:
		// an earlier attempt of this very task ended: on a starved host it
		// ran to its end after asynq's deadline for it, which had already
		// scheduled this retry; its end is in the history, nothing is left
		if _, logged := w.handing.LoadOrStore(job.Name+"\x00ended", true); !logged {
			w.log.Info("a retry of a task whose earlier attempt ended after asynq's deadline for it: nothing left to run (later ones of this job are not logged)",
				handoff.TickAttrs(t)...)
		}
		return a, errEndedEarlier
	case done:
		if len(v) > 80 {
			v = v[:80] + "..."
		}
		return a, w.refuseTick(ctx, job, t, a, RefusedDone, "its tick's task ended already (ledger record "+strconv.Quote(v)+"): a copy of it put back into the queue", false)
	}
	if explicit {
		return a, nil
	}
	if job.Paused {
		// this replica's list pauses it; a live list that does not runs it
		return a, w.refuseTick(ctx, job, t, a, RefusedPaused, "the job is paused (paused: true in the job list)", true)
	}
	if !rd.pauseRead {
		rd.paused, rd.pausedErr = w.paused(ctx, job)
	}
	paused, err := rd.paused, rd.pausedErr
	switch {
	case err != nil:
		w.log.Warn("cannot read the job's pause flag from a majority of the lock masters: running the task", append(handoff.TickAttrs(t), slog.Any("error", err))...)
	case paused:
		return a, w.refuseTick(ctx, job, t, a, RefusedPaused, "the job is paused", false)
	}
	reason, why, err := w.pastLimit(ctx, job, t)
	switch {
	case err != nil:
		w.log.Warn("cannot read the job's max_runs count: running the task", append(handoff.TickAttrs(t), slog.Any("error", err))...)
	case reason != "":
		return a, w.refuseTick(ctx, job, t, a, reason, why, true)
	}
	return a, nil
}

// admissionReads is what admit decides on: tick t's ledger record (done:
// it says the tick's task ended; record: its value) and, when read with it
// (pauseRead), the job's pause flag.
type admissionReads struct {
	done      bool
	record    string
	recordErr error
	pauseRead bool
	paused    bool
	pausedErr error
}

// readAdmission reads tick t's ledger record and, when pause and the queue
// Redis is the only lock master (WithQueueAsLockMaster), job's pause flag
// in the same round trip. Otherwise admit reads the flag from a majority
// of the masters (paused) once the record let the task pass.
func (w *Worker) readAdmission(ctx context.Context, job *config.Job, t scheduler.Tick, pause bool) admissionReads {
	var rd admissionReads
	if !pause || !w.queueMaster {
		rd.done, rd.record, rd.recordErr = readTickRecord(ctx, w.rdb, w.cfg.Namespace, t)
		return rd
	}
	pctx, cancel := context.WithTimeout(ctx, pauseTimeout)
	defer cancel()
	p := w.rdb.Pipeline()
	rec := p.Get(pctx, tickRecordKey(w.cfg.Namespace, t))
	flag := p.Exists(pctx, scheduler.PauseKey(w.cfg.Namespace, job.Name))
	_, _ = p.Exec(pctx) // each command holds its own answer
	rd.done, rd.record, rd.recordErr = tickRecordOf(rec, t)
	n, err := flag.Result()
	rd.pauseRead, rd.paused = true, n > 0
	if err != nil {
		rd.pausedErr = fmt.Errorf("0 of 1 lock masters answered, 1 needed: %w", err)
	}
	return rd
}

// pauseTimeout bounds a read of the pause flags.
const pauseTimeout = 2 * time.Second

// paused reports whether job's pause flag is held by a majority of the
// lock masters (WithLockMasters), as the claim decides a pause. It fails
// when fewer than a majority answer.
func (w *Worker) paused(ctx context.Context, job *config.Job) (bool, error) {
	if len(w.masters) == 0 {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, pauseTimeout)
	defer cancel()
	key := scheduler.PauseKey(w.cfg.Namespace, job.Name)
	held := make([]int64, len(w.masters))
	errs := make([]error, len(w.masters))
	var wg sync.WaitGroup
	for i, m := range w.masters {
		wg.Go(func() { held[i], errs[i] = m.Exists(ctx, key).Result() })
	}
	wg.Wait()
	need := len(w.masters)/2 + 1
	answered, paused := 0, 0
	var last error
	for i := range w.masters {
		if errs[i] != nil {
			last = errs[i]
			continue
		}
		answered++
		if held[i] > 0 {
			paused++
		}
	}
	if paused >= need {
		return true, nil
	}
	if answered < need {
		return false, fmt.Errorf("%d of %d lock masters answered, %d needed: %w", answered, len(w.masters), need, last)
	}
	return false, nil
}

// pastLimit reports whether scheduled tick t is beyond one of job's limits
// in this replica's job list: before a runtime schedule was put, before
// start, after end, not the one-shot
// tick at, or after the job ran its max_runs ticks (the count reached it,
// the tick was not counted, and it is later than every counted tick). A
// count that is no integer from 0 to 2^53-2 is an error wrapping
// ErrCorrupt that names its key.
func (w *Worker) pastLimit(ctx context.Context, job *config.Job, t scheduler.Tick) (RefusalReason, string, error) {
	if !job.Created.IsZero() && t.At.Before(job.Created) {
		// a tick of a schedule deleted since, whose id was put again: not
		// one of the new definition's, which must not run it
		return RefusedOutsideWindow, "its tick is before its runtime schedule was put (" + job.Created.UTC().Format(time.RFC3339Nano) + "): a tick of a schedule of that id deleted since", nil
	}
	if s, err := time.Parse(time.RFC3339, job.Start); job.Start != "" && err == nil && t.At.Before(s) {
		return RefusedOutsideWindow, "its tick is before the job's start " + job.Start, nil
	}
	if e, err := time.Parse(time.RFC3339, job.End); job.End != "" && err == nil && t.At.After(e) {
		return RefusedJobDone, "its tick is after the job's end " + job.End, nil
	}
	if at, err := time.Parse(time.RFC3339, job.At); job.At != "" && err == nil && !t.At.Equal(at.Truncate(time.Second)) {
		return RefusedJobDone, "its tick is not the one-shot job's tick " + job.At, nil
	}
	if job.MaxRuns <= 0 || w.rdb == nil {
		return "", "", nil
	}
	keys := handoff.JobRunCountKeys(w.cfg.Namespace, job)
	pipe := w.rdb.Pipeline()
	count := pipe.Get(ctx, keys[0])
	mine := pipe.ZScore(ctx, keys[1], t.ID())
	newest := pipe.ZRevRangeWithScores(ctx, keys[1], 0, 0)
	_, _ = pipe.Exec(ctx)
	v, err := count.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", "", nil
	case err != nil:
		return "", "", err
	}
	n, ok := quorum.ParseCounter(v) // as max_runs.lua reads it
	switch {
	case !ok:
		return "", "", handoff.CorruptCount(keys[0], v)
	case n < int64(job.MaxRuns):
		return "", "", nil
	}
	if err := mine.Err(); err == nil {
		return "", "", nil // counted: one of its max_runs ticks
	} else if !errors.Is(err, redis.Nil) {
		return "", "", err
	}
	last, err := newest.Result()
	if err != nil {
		return "", "", err
	}
	if len(last) > 0 && t.At.UnixMilli() > int64(last[0].Score) {
		return RefusedJobDone, fmt.Sprintf("the job ran its max_runs (%d) ticks", job.MaxRuns), nil
	}
	return "", "", nil
}

// refuseTick refuses tick t's task for reason (why says it in a sentence):
// recorded in the history as refused, counted, logged once per job and
// reason, marked done in the ledger (unless it is too old or done already:
// then no copy could run anyway), and archived. byList says the reason
// comes from this replica's job list: while a live replica's list defines
// the job differently, the task is handed back instead.
func (w *Worker) refuseTick(ctx context.Context, job *config.Job, t scheduler.Tick, a admitted, reason RefusalReason, why string, byList bool) error {
	if byList && w.roster != nil {
		if other := w.roster.DefinedDifferently(job.Name); other != "" {
			if _, logged := w.handing.LoadOrStore(job.Name+"\x00limit", true); !logged {
				w.log.Info("a limit of this replica's job list says a task may not run, but a live replica's list defines the job differently: handing its tasks back (rolling deploy?)",
					append(handoff.TickAttrs(t), slog.String("why", why), slog.String("other", other))...)
			}
			return fmt.Errorf("worker: %s: %s here; %s defines the job differently: %w", t.ID(), why, other, ErrRunsElsewhere)
		}
	}
	w.refusals.add(reason)
	if _, logged := w.refused.LoadOrStore(job.Name+"\x00"+string(reason), true); !logged {
		w.log.Warn("refusing a task: "+why+" (recorded, archived, not run; later refusals of this job and reason are counted, not logged)",
			append(handoff.TickAttrs(t), slog.String("reason", string(reason)))...)
	}
	w.hist().refused(ctx, t, why)
	w.observe(RunObservation{Job: job.Name, Status: jobs.StatusRefused})
	if reason != RefusedTooOld && reason != RefusedDone {
		w.markDone(ctx, t, a.expiry)
	}
	return fmt.Errorf("%w: %s: %s: %w", ErrRefused, t.ID(), why, asynq.SkipRetry)
}

// errEndedEarlier: the task's tick ended in an earlier attempt of the task
// (admit); the task completes without a run or a record.
var errEndedEarlier = errors.New("an earlier attempt of this task ended")

// retriedOf is the task's retry count (0 outside a task).
func retriedOf(ctx context.Context) int {
	n, _ := asynq.GetRetryCount(ctx)
	return n
}

// taskEnded reports whether the handler's result err for a task leaves it
// ended for good (asynq neither retries nor requeues it), so its tick is
// marked done: a success or a skip, or a final failure reached while the
// task's context lives (asynq requeues a task its shutdown interrupted,
// whatever the handler returned).
func taskEnded(ctx context.Context, err error, lastAttempt bool) bool {
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil, errors.Is(err, ErrRunsElsewhere):
		return false
	}
	return lastAttempt || errors.Is(err, asynq.SkipRetry)
}

// The checks of a task before it is admitted (above): its shape,
// its run id, and whether its tick is due by this worker's clock.

// ErrRefused wraps why a worker refused a task it will never run: a bad
// or missing signature, a task ID that is not its tick's, a malformed run
// id or retry count.
var ErrRefused = errors.New("worker: task refused")

// refuse archives a task the worker will not run. It logs the first
// refusal of each kind and counts every one: what a forged task says (job,
// tick, namespace) is the forger's to choose, so neither the log nor the
// worker's memory may grow with it.
func (w *Worker) refuse(t scheduler.Tick, kind string, err error) error {
	w.count(t.Job, func(c *counters) { c.failed.Add(1) }) // per job only for jobs of the config
	w.refusals.add(RefusedBadTask)
	if _, logged := w.refused.LoadOrStore(kind, true); !logged {
		w.log.Error("refusing a task: "+kind+" (archived, not run; later refusals of this kind are counted, not logged)",
			append(handoff.TickAttrs(t), slog.Any("error", err))...)
	}
	return fmt.Errorf("%w: %s: %w: %w", ErrRefused, t.ID(), err, asynq.SkipRetry)
}

// runIDRE is the shape of a run id (the scheduler's are 32 hex digits):
// nothing that could not be a token.
var runIDRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// validTask checks what a signed payload says against the task that
// carried it: the task ID is the tick's (job@tick, so asynq's ID dedup
// covers the tick), and the run id has its shape.
func validTask(t scheduler.Tick, taskID string) error {
	if taskID != t.ID() {
		return fmt.Errorf("task ID %q is not its tick's %q", taskID, t.ID())
	}
	if !runIDRE.MatchString(t.RunID) {
		return fmt.Errorf("run id %q is not 1 to 64 of A-Z a-z 0-9 _ . -", t.RunID)
	}
	return nil
}

// errNotDue: a tick in the future by this worker's clock. A scheduler
// never dispatches a tick before it is due (by Redis's clock, within
// max_clock_skew), so either this worker's clock is behind or the task was
// signed for later; either way it waits, handed back without spending an
// attempt, rather than be lost.
var errNotDue = fmt.Errorf("tick not due yet by this worker's clock: %w", ErrRunsElsewhere)

// validTick checks what the worker can check of a tick without Redis: it is
// not in the future beyond the clock skew both replicas may have. (Whether
// the job's schedule has the tick is not checked: during a rolling deploy
// that changes the schedule, replicas with the old one dispatch ticks the
// new one does not have, and those must run.)
func (w *Worker) validTick(t scheduler.Tick) error {
	if ahead := time.Until(t.At); ahead > 2*w.cfg.MaxClockSkew+time.Second {
		if _, logged := w.refused.LoadOrStore(t.Job+"\x00not due", true); !logged {
			w.log.Warn("a task's tick is in the future by this worker's clock: it waits (is this host's clock behind?)",
				append(handoff.TickAttrs(t), slog.Duration("ahead", ahead))...)
		}
		return fmt.Errorf("worker: %s: %s ahead: %w", t.ID(), ahead.Round(time.Millisecond), errNotDue)
	}
	return nil
}
