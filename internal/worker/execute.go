package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/tracing"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// errRunTimeout is the cause that ends a run after its job's timeout.
var errRunTimeout = errors.New("worker: run timed out")

// runTick runs tick t of job under the job's concurrency policy and returns
// what the asynq handler returns:
//
//   - nil: the run succeeded, or the tick was skipped (forbid, or a newer
//     tick holds a replace job). A skip is a success on purpose: an error
//     would be retried, and RevokeTask would delete the task and with it the
//     tick's ID, letting a late dispatch enqueue the tick again.
//   - an error wrapping ErrReplaced and asynq.SkipRetry: a newer tick replaced
//     the run; it is archived, not retried.
//   - any other error: the run failed (handler error, timeout, execution
//     lease lost mid-run, lock masters unreachable); asynq retries it per the
//     job's max_retry, and the retry takes the lease anew.
//
// retries says that the caller retries failures (asynq): then a run that
// finds the lease held by an earlier attempt of the same tick waits for it.
// Without retries (local runs) the same tick's holder can only be a duplicate
// dispatch, which is skipped.
//
// ledger, when given, writes the tick's ledger record in the round trip of
// a successful run's end (the caller learns from it whether it landed).
func (e *engine) runTick(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, ledger runlog.Also) (err error) {
	var span trace.Span // nil: tracing off
	if e.tracer != nil {
		ctx, span = e.traceRun(ctx, job, t, attempt)
		defer func() { endRun(span, err) }()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ar := &activeRun{at: t.At, local: !retries, cancel: cancel}
	e.register(job.Name, ar)
	defer e.unregister(job.Name, ar)
	if e.deletedSchedule(ctx, job.Name) {
		// the stop request came before this run could be stopped
		e.count(t.Job, func(c *counters) { c.failed.Add(1) })
		e.log.Info("not running a tick of a runtime schedule deleted with its runs stopped", handoff.TickAttrs(t)...)
		e.hist().refused(ctx, t, "its runtime schedule was deleted")
		e.observe(RunObservation{Job: job.Name, Status: jobs.StatusRefused})
		return fmt.Errorf("worker: %s: %w: %w", t.ID(), ErrScheduleDeleted, asynq.SkipRetry)
	}

	run := jobs.Run{
		Job:     job.Name,
		Tick:    t.At.UTC(),
		RunID:   t.RunID,
		Attempt: attempt,
		Fence:   t.Fence,
		Replica: e.replica,
	}
	if job.Handler != nil {
		run.Payload = job.Handler.Payload
	}
	base := e.log.With(
		slog.String("job", job.Name),
		slog.String("tick", run.Tick.Format(time.RFC3339)),
		slog.String("run_id", run.RunID),
		slog.String("replica", e.replica),
		slog.Int("attempt", attempt),
	)
	if t.Manual {
		base = base.With(slog.Bool("manual", true))
	}
	if span != nil && span.SpanContext().IsValid() {
		base = base.With(slog.String("trace_id", span.SpanContext().TraceID().String()))
	}
	// Until the run holds its lease (or, allow, its fence), "fence" is the
	// dispatch fence of a local run, 0 for a queued one (a payload's fence
	// is never used).
	log := base.With(slog.Int64("fence", t.Fence))

	p := e.policyOf(job)
	g, err := p.acquire(ctx, job, t, attempt, retries, log)
	if g == nil {
		return err
	}
	run.Fence = g.fence
	if g.slot != nil {
		run.Slot = g.slot.slot
	}
	if span != nil {
		span.SetAttributes(tracing.Fence.Int64(run.Fence))
	}
	log = base.With(slog.Int64("fence", run.Fence))
	return e.execute(ctx, p, job, t, run, g, ledger, log)
}

// execute runs the execution: under the lease's context and with the lease as
// Validity when there is one, bounded by the job's timeout. It gives back
// what the run holds (p.release) before returning. The run's start records
// its holder (g.record), a success writes ledger, and the end gives the
// lease back (g.giveBack, where the policy lets it), each in the round trip
// of its history entry.
func (e *engine) execute(ctx context.Context, p policy, job *config.Job, t scheduler.Tick, run jobs.Run, g *grant, ledger runlog.Also, log *slog.Logger) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	validity, stop := g.watch(cancel)
	defer func() {
		stop()
		p.release(ctx, job, t, g, log)
	}()
	execCtx := runCtx
	if job.Timeout > 0 {
		var done context.CancelFunc
		execCtx, done = context.WithTimeoutCause(runCtx, job.Timeout, errRunTimeout)
		defer done()
	}

	log.Info("run started")
	hist := e.hist()
	start := time.Now()
	hist.start = hist.startLater(ctx, e.clock, e.cfg.History.StartAfter, t, run, g.record)
	defer hist.start.end()
	res, err := e.exec.Execute(execCtx, job, run, validity)
	took := slog.Duration("took", time.Since(start))
	obs := RunObservation{Job: job.Name, StartLag: start.Sub(t.At), Took: time.Since(start)}
	defer func() { e.observe(obs) }()
	if e.tracer != nil {
		defer func() { trace.SpanFromContext(ctx).SetAttributes(tracing.Status.String(string(obs.Status))) }()
	}
	switch {
	case job.Exec != nil:
		log = log.With(slog.Int("exit_code", res.ExitCode))
	case job.HTTP != nil:
		log = log.With(slog.Int("status", res.Status))
	}

	cause := context.Cause(runCtx)
	switch {
	case runCtx.Err() != nil && errors.Is(cause, ErrReplaced):
		e.count(t.Job, func(c *counters) { c.replaced.Add(1) })
		log.Info("replaced by a newer tick", took)
		hist.finished(ctx, t, run, jobs.StatusReplaced, job, res, "stopped for a newer tick", "", g.giveBack)
		obs.Status = jobs.StatusReplaced
		return fmt.Errorf("worker: %s: %w: %w", t.ID(), ErrReplaced, asynq.SkipRetry)
	case runCtx.Err() != nil && stoppedOnRequest(cause):
		e.count(t.Job, func(c *counters) { c.stopped.Add(1) })
		log.Info("stopped on request", took, slog.String("why", cause.Error()))
		hist.finished(ctx, t, run, jobs.StatusStopped, job, res, cause.Error(), "", g.giveBack)
		obs.Status = jobs.StatusStopped
		return fmt.Errorf("worker: %s: %w: %w", t.ID(), cause, asynq.SkipRetry)
	case err == nil:
		e.count(t.Job, func(c *counters) { c.ran.Add(1) })
		log.Info("run succeeded", took)
		// the ledger record goes before the lease: a copy of the task that
		// takes the lease next finds the tick done
		hist.finished(ctx, t, run, jobs.StatusOK, job, res, "", "", ledger, g.giveBack)
		obs.Status = jobs.StatusOK
		return nil
	}
	e.count(t.Job, func(c *counters) { c.failed.Add(1) })
	st := jobs.StatusFailed
	switch {
	case validity != nil && runCtx.Err() != nil && errors.Is(cause, locking.ErrLost):
		st = jobs.StatusLeaseLost
		var sl *slotLost
		if errors.As(cause, &sl) {
			err = errors.Join(err, fmt.Errorf("worker: %s: %w", t.ID(), cause))
		} else {
			err = errors.Join(err, fmt.Errorf("worker: %s: execution lease lost mid-run: %w", t.ID(), cause))
		}
	case runCtx.Err() != nil:
		err = errors.Join(err, fmt.Errorf("worker: %s: stopped: %w", t.ID(), cause))
	case errors.Is(context.Cause(execCtx), errRunTimeout):
		st = jobs.StatusTimedOut
		err = errors.Join(err, fmt.Errorf("worker: %s: %w after %s", t.ID(), errRunTimeout, job.Timeout))
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrPermission):
		// a command that cannot start fails the same way on every attempt
		err = fmt.Errorf("worker: %s: command cannot start (not retried): %w: %w", t.ID(), err, asynq.SkipRetry)
	default:
		err = &tickError{tick: t, err: err}
	}
	tail := outputTail(res.Output, job)
	if tail != "" {
		log = log.With(slog.String("output_tail", tail))
	}
	log.Warn("run failed", took, slog.Any("error", err))
	hist.finished(ctx, t, run, st, job, res, err.Error(), tail, g.giveBack)
	obs.Status = st
	return err
}

// traceRun starts the "baton.run" span of tick t's attempt, a child of the
// span in ctx (the dispatch's, as the task carried it), and returns ctx
// carrying it.
func (e *engine) traceRun(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int) (context.Context, trace.Span) {
	return e.tracer.Start(ctx, tracing.SpanRun, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.TickAttrs(job.Name, t.At, t.Fence, e.replica)...),
		trace.WithAttributes(tracing.Attempt.Int(attempt), tracing.RunID.String(t.RunID)))
}

// endRun ends a run's span with the error runTick returns: a failed
// attempt is an error; a replaced run or one handed to another replica is
// not, nor is one stopped on request (its baton.status says what became of
// it).
func endRun(span trace.Span, err error) {
	if err != nil && !errors.Is(err, ErrReplaced) && !errors.Is(err, ErrRunsElsewhere) && !stoppedOnRequest(err) {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// tickError is a run's error as the worker returns it (asynq keeps it as
// the task's last error): the tick, then what went wrong, saying the job's
// name and the package once.
type tickError struct {
	tick scheduler.Tick
	err  error
}

func (e *tickError) Error() string {
	return "worker: " + e.tick.ID() + ": " + runlog.CleanReason(e.tick, e.err.Error())
}

func (e *tickError) Unwrap() error { return e.err }

// ledgerTimeout bounds a write of a tick's ledger record.
const ledgerTimeout = 2 * time.Second

// runHistory is what the worker writes to the run history (the queue
// Redis): the events of a run, typed by jobs.Status.
type runHistory struct {
	w     *runlog.Writer
	start *lateStart // the run's "started" entry, if one is due (execute)
}

// hist is the run history the engine writes to.
func (e *engine) hist() runHistory { return runHistory{w: runlog.NewWriter(e.cfg, e.rdb, e.log)} }

// lateStart writes a run's "started" entry once the run has lasted
// history.start_after, unless it ended first: a run that ends sooner has
// one entry, written with its end, which says how long it took (one
// history write a run instead of two); a longer one shows as running from
// then on. With start_after 0 the entry is written at once.
type lateStart struct {
	done, exited chan struct{}
	once         sync.Once
	written      bool   // set before exited closes
	id           string // the entry's ID, when written (runlog.End.StartID)
	began        time.Time
}

// startLater schedules the "started" entry of run (tick t) on clk, after.
// also (the holder record) is written now: with the entry when it is due
// at once, else alone.
func (h runHistory) startLater(ctx context.Context, clk clock.Clock, after time.Duration, t scheduler.Tick, run jobs.Run, also runlog.Also) *lateStart {
	ls := &lateStart{done: make(chan struct{}), exited: make(chan struct{}), began: time.Now()}
	if after <= 0 {
		ls.id = h.w.Started(ctx, t, run.Replica, run.Attempt, run.Fence, also)
		ls.written = true
		close(ls.exited)
		return ls
	}
	h.w.Send(ctx, also)
	timer := clk.NewTimer(after)
	go func() {
		defer close(ls.exited)
		defer timer.Stop()
		select {
		case <-timer.C():
		case <-ls.done:
			return
		}
		select {
		case <-ls.done: // ended at the same moment: its end says it all
			return
		default:
		}
		// written only if it landed: else the end says how long it took
		ls.id, ls.written = h.w.StartedAgo(ctx, t, run.Replica, run.Attempt, run.Fence, time.Since(ls.began))
	}()
	return ls
}

// end stops the "started" entry if it is not written yet, waits for one
// being written (it must come before the end's), and tells whether it was.
func (ls *lateStart) end() bool {
	ls.once.Do(func() { close(ls.done) })
	<-ls.exited
	return ls.written
}

// finished records how run ended with status st: an exec job's exit code
// when it ran its command to an end of its own, an http job's response
// status when it got one; also go in the same round trip.
func (h runHistory) finished(ctx context.Context, t scheduler.Tick, run jobs.Run, st jobs.Status, job *config.Job, res jobs.Result, reason, output string, also ...runlog.Also) {
	noteEnd(ctx, st, reason)
	end := runlog.End{Replica: run.Replica, Attempt: run.Attempt, Fence: run.Fence, Status: string(st), Reason: reason, Output: output}
	if h.start != nil {
		if written := h.start.end(); !written || runlog.Compact(t.Job) {
			// the start is not written, or a runtime schedule's end stands
			// for it (its history is a short list: history_add_list.lua)
			end.Took, end.By = max(time.Since(h.start.began), time.Millisecond), t.Replica
		} else {
			end.StartID = h.start.id
		}
	}
	switch {
	case job.Exec != nil && res.ExitCode >= 0 && st != jobs.StatusSkipped && st != jobs.StatusReplaced && st != jobs.StatusDropped && st != jobs.StatusStopped:
		end.ExitCode = &res.ExitCode
	case job.HTTP != nil && res.Status != 0:
		end.HTTPStatus = res.Status
	}
	h.w.Finished(ctx, t, job, end, also...)
}

// refused records that the worker refused tick t's task, and why. It is a
// record of the tick, not of the run: a copy of a task that ran is
// refused beside the run's own record, which it leaves as it was.
func (h runHistory) refused(ctx context.Context, t scheduler.Tick, reason string) {
	noteEnd(ctx, jobs.StatusRefused, reason)
	h.w.NotRun(ctx, t, string(jobs.StatusRefused), reason)
}

// The engine is what the runs of a worker share: the config,
// the clients, the runs in progress (to stop them) and the history writes.
// runTick (execute.go) is its run path; the policies (policy.go) decide how
// runs of one job meet.

// activeRun is a run in progress on this worker (waiting for its lease or
// executing): what a replace request or the shutdown needs to stop it.
type activeRun struct {
	at     time.Time
	local  bool
	cancel context.CancelCauseFunc
}

// engine applies the concurrency policies and runs executions. It serves the
// asynq handler and local runs alike; only the asynq path has retries.
type engine struct {
	cfg     *config.Config
	locks   *locking.Client
	rdb     redis.UniversalClient // queue Redis: side records, cancel channel
	exec    executor.Runner
	replica string
	log     *slog.Logger
	clock   clock.Clock // backoffs, heartbeats and waits
	onRun   func(RunObservation)
	tracer  trace.Tracer // nil: tracing off
	// the queue Redis is the only lock master (WithQueueAsLockMaster)
	queueMaster bool
	stats       counters
	// job name -> its concurrency policy, chosen once (choosePolicies)
	policies map[string]policy
	byJob    sync.Map // job name -> *counters, jobs of cfg only
	// job + reason -> true: a refused replace request was logged
	badCancel sync.Map
	// job name -> true: a copy of an allow task held back by a running
	// attempt was logged
	heldBack sync.Map

	mu     sync.Mutex
	active map[string]map[*activeRun]struct{} // by job name
	// deleted holds when a stop request for a deleted runtime schedule
	// arrived, by job name, for stopMemory (see deletedSchedule)
	deleted map[string]time.Time
	closing bool
	wg      sync.WaitGroup // runs in flight, asynq and local
}

// notStarted records in the history that tick t's attempt did not start.
func (e *engine) notStarted(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, st jobs.Status, reason string) {
	run := jobs.Run{Job: job.Name, Tick: t.At, RunID: t.RunID, Attempt: attempt, Replica: e.replica}
	e.hist().finished(ctx, t, run, st, job, jobs.Result{ExitCode: -1}, reason, "")
	e.observe(RunObservation{Job: job.Name, Status: st})
}

// observe reports a run to the run observer, if any.
func (e *engine) observe(o RunObservation) {
	if e.onRun != nil {
		e.onRun(o)
	}
}

func (e *engine) register(job string, ar *activeRun) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.active == nil {
		e.active = map[string]map[*activeRun]struct{}{}
	}
	if e.active[job] == nil {
		e.active[job] = map[*activeRun]struct{}{}
	}
	e.active[job][ar] = struct{}{}
}

func (e *engine) unregister(job string, ar *activeRun) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.active[job], ar)
	if len(e.active[job]) == 0 {
		delete(e.active, job)
	}
}

// cancelRuns cancels every active run that match reports true for, with
// cause, and returns how many.
func (e *engine) cancelRuns(cause error, match func(job string, ar *activeRun) bool) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for job, runs := range e.active {
		for ar := range runs {
			if match(job, ar) {
				ar.cancel(cause)
				n++
			}
		}
	}
	return n
}

// errShutdown is the cause that ends runs when the worker stops.
var errShutdown = errors.New("worker: shutting down")
