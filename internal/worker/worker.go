package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/lifecycle"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/tracing"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Worker runs jobs: cron-mode runs from the asynq queues, and local-mode runs
// handed to it in-process (RunLocal). Every run goes through the job's
// concurrency policy (forbid, allow, replace, buffer_one, buffer_all; see
// ErrReplaced and Stats) and, unless the policy is allow, runs under the
// job's execution lease.
type Worker struct {
	engine
	// task id -> true: a task handleError found ended on purpose (replaced,
	// stopped on request, refused): asynq's "Retry exhausted" line of its
	// archive is not a warning (asynqLogger)
	meantEnds    sync.Map
	redisOpt     asynq.RedisConnOpt
	asynqRDB     redis.UniversalClient // the asynq server's connection
	localOnly    bool
	taskCheck    time.Duration
	delayedCheck time.Duration
	version      string
	role         string

	roster    *roster.Roster
	heartbeat *roster.Heartbeat
	handing   sync.Map // job name -> true: its hand-back was logged
	refused   sync.Map // job + reason -> true: a refusal was logged
	refusals  refusalCounts
	masters   []redis.UniversalClient // lock masters: pause flags (WithLockMasters)
	handlers  *jobs.Registry          // Go handlers the executor runs (WithHandlers)

	srv      *asynq.Server
	ps       *redis.PubSub
	subDone  chan struct{}
	parts    *lifecycle.Group // started by Start, stopped by Shutdown
	starting bool             // Start is starting parts
	started  bool

	// localCtx is the base of local runs; cancelled when the shutdown grace
	// is over.
	localCtx    context.Context
	localCancel context.CancelCauseFunc
}

var _ handoff.LocalRunner = (*Worker)(nil)

// New returns a worker for cfg's jobs. queue is the queue Redis (asynq's
// connection, also used for the holder records and replace requests); locks
// takes the execution leases; exec runs executions (an *executor.Executor). It makes no
// connection until Start. The locking client stays owned by the caller and must
// outlive Shutdown. Options: WithReplica, WithReplicaInfo, WithLogger,
// WithClock, WithPollIntervals, WithLocalOnly, WithLockMasters, WithHandlers.
func New(cfg *config.Config, queue asynq.RedisConnOpt, locks *locking.Client, exec executor.Runner, opts ...Option) *Worker {
	o := newOptions(opts)
	w := &Worker{
		engine: engine{
			cfg:     cfg,
			locks:   locks,
			exec:    exec,
			log:     o.log,
			replica: o.replica,
			clock:   o.clock,
			onRun:   o.onRun,
			tracer:  o.tracer,
			// admission and the leases' release go in the queue Redis's
			// round trips
			queueMaster: o.queueIsMaster,
		},
		redisOpt:     queue,
		taskCheck:    o.taskCheck,
		delayedCheck: o.delayedCheck,
		version:      o.version,
		role:         o.role,
		localOnly:    o.localOnly,
		masters:      o.lockMasters,
		handlers:     o.handlers,
	}
	w.choosePolicies()
	w.localCtx, w.localCancel = context.WithCancelCause(context.Background())
	return w
}

// Stats returns the worker's run counters.
func (w *Worker) Stats() Stats { return w.engine.Stats() }

// Start starts the worker's parts in order (parts): its Redis client, its
// roster heartbeat, the subscription to the replace requests of the
// config's replace-policy jobs (one pub/sub connection) and the runs: the
// asynq server (unless WithLocalOnly: Concurrency and Queues from
// cfg.Worker, ShutdownTimeout = cfg.Worker.ShutdownGrace, retries delayed
// as backoffDelay says) and RunLocal's runs. It fails if Redis cannot be
// reached (the parts started are stopped again) or the worker was started
// before.
func (w *Worker) Start() error {
	w.mu.Lock()
	if w.started || w.starting || w.closing {
		w.mu.Unlock()
		return errors.New("worker: already started")
	}
	parts := w.newParts()
	w.parts, w.starting = parts, true
	w.mu.Unlock()
	err := parts.Start(context.Background())
	w.mu.Lock()
	defer w.mu.Unlock()
	w.starting = false
	switch {
	case w.closing:
		// Shutdown came while the parts started: it stops them (or
		// stopped the group before it began, which then refused to start)
		return errors.New("worker: shut down while starting")
	case err != nil:
		return fmt.Errorf("worker: %w", err)
	}
	w.started = true
	return nil
}

// newParts returns the worker's parts in their starting order; Shutdown
// stops them in reverse.
func (w *Worker) newParts() *lifecycle.Group {
	return lifecycle.NewGroup(
		lifecycle.Part{Name: "redis", Service: lifecycle.Funcs(w.openRedis, w.closeRedis)},
		lifecycle.Part{Name: "roster", Service: lifecycle.Funcs(w.startRoster, w.stopRoster)},
		lifecycle.Part{Name: "replace requests", Service: lifecycle.Funcs(w.subscribeReplaceRequests, w.stopSubscriber)},
		lifecycle.Part{Name: "runs", Service: lifecycle.Funcs(w.startRuns, w.drainRuns)},
	)
}

// Shutdown stops the worker, in this order:
//
//  1. RunLocal refuses new runs, and asynq stops fetching tasks.
//  2. Running runs get cfg.Worker.ShutdownGrace to finish.
//  3. Then the rest are cancelled: asynq pushes their tasks back to the queue
//     (not counted as a retry; the next attempt of the same tick waits for
//     this one to let go of the lease), and their executors stop them (exec
//     children are killed).
//  4. Each run releases its execution lease with its token check as it
//     returns; Shutdown waits for all of them.
//  5. The replace subscription, the roster heartbeat (which leaves the
//     roster) and the Redis connections are closed: the parts in reverse.
//
// If ctx ends before that, every remaining run is cancelled at once and
// Shutdown still waits for the runs to return (and release their leases),
// then returns ctx's error; the parts after the runs still get
// lifecycle.MinStop each. A Go handler that ignores its context holds
// Shutdown up. A worker that was never started holds nothing: Shutdown only
// marks it closed.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return errors.New("worker: already shut down")
	}
	w.closing = true
	parts := w.parts
	w.mu.Unlock()
	defer w.localCancel(errShutdown)
	if parts == nil {
		return nil
	}
	if err := parts.Stop(ctx); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	return nil
}

// openRedis opens the worker's connection to the queue Redis (holder
// records, roster, replace requests).
func (w *Worker) openRedis(context.Context) error {
	rdb, ok := w.redisOpt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return fmt.Errorf("unsupported redis option %T", w.redisOpt)
	}
	w.rdb = rdb
	return nil
}

// closeRedis closes the worker's Redis client.
func (w *Worker) closeRedis(context.Context) error {
	err := w.rdb.Close()
	if err == nil || errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return fmt.Errorf("close redis: %w", err)
}

// startRuns starts the asynq server on a connection of its own (unless the
// worker runs local jobs only); RunLocal's runs need nothing started.
func (w *Worker) startRuns(context.Context) error {
	if w.localOnly {
		return nil
	}
	// asynq's connection, its cancel subscription moved off the shared
	// channel (see cancelRedirect)
	qc, _ := w.redisOpt.MakeRedisClient().(redis.UniversalClient)
	w.asynqRDB = qc
	w.srv = asynq.NewServerFromRedisClient(cancelRedirect{UniversalClient: qc, channel: asynqCancelRedirect(w.cfg.Namespace)}, asynq.Config{
		Concurrency:              w.cfg.Worker.Concurrency,
		Queues:                   w.asynqQueues(),
		ShutdownTimeout:          w.cfg.Worker.ShutdownGrace,
		RetryDelayFunc:           w.retryDelay,
		TaskCheckInterval:        w.taskCheck,
		DelayedTaskCheckInterval: w.delayedCheck,
		Logger:                   asynqLogger{l: w.log.With(slog.String("component", "asynq")), meant: &w.meantEnds},
		ErrorHandler:             asynq.ErrorHandlerFunc(w.handleError),
		// a task handed back to a replica that can run it spends no attempt
		IsFailure: func(err error) bool { return !errors.Is(err, ErrRunsElsewhere) },
	})
	if err := w.srv.Start(asynq.HandlerFunc(w.process)); err != nil {
		_ = qc.Close()
		return err
	}
	return nil
}

// drainRuns stops the runs (Shutdown's steps 1 to 4): asynq stops
// fetching, the runs get the grace period, then are cancelled; it waits
// for every run to return, also when ctx ends first (then it cancels them
// all at once and returns ctx's error).
func (w *Worker) drainRuns(ctx context.Context) error {
	grace := time.AfterFunc(w.cfg.Worker.ShutdownGrace, func() { w.localCancel(errShutdown) })
	defer grace.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w.srv != nil {
			w.srv.Shutdown()
		}
		w.wg.Wait()
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("shutdown: %w", ctx.Err())
		w.localCancel(errShutdown)
		n := w.cancelRuns(errShutdown, func(string, *activeRun) bool { return true })
		w.log.Warn("shutdown deadline passed: cancelling the remaining runs", slog.Int("runs", n))
		<-done
	}
	w.localCancel(errShutdown)
	if w.asynqRDB != nil {
		_ = w.asynqRDB.Close()
	}
	return err
}

// RunLocal starts tick t of local-mode job in-process and returns at once.
// The run goes through the job's concurrency policy like a queued run, as
// attempt 1 and without retries; it is not bound to ctx (which only covers
// the hand-off) but to the worker: Shutdown gives it the grace period and
// then cancels it. RunLocal fails if the worker is not started or is
// shutting down.
func (w *Worker) RunLocal(ctx context.Context, job *config.Job, t scheduler.Tick) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closing:
		return errors.New("worker: shutting down")
	case !w.started:
		return errors.New("worker: not started")
	}
	runCtx := w.localCtx
	if w.tracer != nil {
		// the dispatch's span is the run's parent
		runCtx = trace.ContextWithSpanContext(runCtx, trace.SpanContextFromContext(ctx))
	}
	w.wg.Go(func() {
		ctx, end := withRunEnd(runCtx)
		ow := &outcomeWrite{e: &w.engine, t: t}
		err := w.runTick(ctx, job, t, 1, false, ow.also) // logged and counted by runTick
		if ctx.Err() == nil || err == nil {
			w.recordOutcome(ctx, t, end, ow)
		}
	})
	return nil
}

// process is the asynq handler of taskTypeRun tasks.
func (w *Worker) process(ctx context.Context, task *asynq.Task) error {
	w.wg.Add(1)
	defer w.wg.Done()
	t, err := handoff.ParseTask(task)
	var newer *handoff.NewerFormatError
	if err != nil && !errors.As(err, &newer) {
		return w.refuse(t, "a bad payload", err)
	}
	if ns := handoff.TaskNamespace(task); ns != w.cfg.Namespace {
		// queues carry the namespace: a task of another in ours was put
		// there by hand
		return w.refuse(t, "another namespace", fmt.Errorf("task of namespace %q, this worker's is %q", ns, w.cfg.Namespace))
	}
	// from here on, only what a key of this deployment signed
	g := handoff.NewSigner(w.cfg.Security)
	body, err := g.Verify(handoff.DomainTask, task.Payload())
	if err == nil {
		t, err = handoff.ParsePayload(body)
		if errors.As(err, &newer) {
			// signed by this deployment, in a format only a newer
			// replica reads
			return w.newerFormat(ctx, newer, handoff.PayloadExpiry(body))
		}
	}
	if err == nil {
		id, _ := asynq.GetTaskID(ctx)
		err = validTask(t, id)
	}
	if q, _ := asynq.GetQueueName(ctx); err == nil && (g.Enabled() || handoff.PayloadQueue(body) != "") && handoff.PayloadQueue(body) != q {
		// asynq dedupes task IDs per queue: a copy in another queue would run
		err = fmt.Errorf("payload names queue %q, the task is in %q", handoff.PayloadQueue(body), q)
	}
	if err != nil {
		return w.refuse(t, "a bad signature or a payload that does not match its task", err)
	}
	t.Fence = 0 // never from a payload: runs take theirs from the lock masters
	job, ok := w.cfg.Job(t.Job)
	if config.IsScheduleJob(t.Job) {
		def, err := handoff.PayloadDef(body)
		if err != nil {
			return w.refuse(t, "a payload that names no schedule definition", err)
		}
		if job, err = w.routeSchedule(ctx, t, job, def, handoff.PayloadExpiry(body)); err != nil {
			return err
		}
	} else if !ok || job.Mode != config.ModeCron {
		return w.cannotRun(ctx, t, roster.Task{Job: t.Job}, listWhy(job))
	}
	if err := w.validTick(t); err != nil {
		return err
	}
	retried, _ := asynq.GetRetryCount(ctx)
	if retried < 0 {
		return w.refuse(t, "a negative retry count", fmt.Errorf("retry count %d", retried))
	}
	ctx, end := withRunEnd(ctx)
	adm, err := w.admit(ctx, job, t, handoff.PayloadExpiry(body))
	if errors.Is(err, errEndedEarlier) {
		return nil
	}
	if err != nil {
		if taskEnded(ctx, err, false) {
			w.recordOutcome(ctx, t, end, nil) // refused for good
		}
		return err
	}
	if retried > job.MaxRetry {
		// asynq's budget is one above the job's (see newRunTask): a task
		// retried after a crash of its last allowed attempt ends here
		w.count(t.Job, func(c *counters) { c.failed.Add(1) })
		w.log.Error("retries exhausted: archiving the task", append(handoff.TickAttrs(t), slog.Int("retried", retried),
			slog.Int("max_retry", job.MaxRetry))...)
		w.markDone(ctx, t, adm.expiry)
		noteEnd(ctx, jobs.StatusFailed, fmt.Sprintf("retries exhausted (%d of max_retry %d): its last attempt's worker died", retried, job.MaxRetry))
		w.recordOutcome(ctx, t, end, nil)
		return fmt.Errorf("worker: %s: retries exhausted (%d of max_retry %d): %w", t.ID(), retried, job.MaxRetry, asynq.SkipRetry)
	}
	if w.tracer != nil {
		// the dispatch's span, as the task carries it, is the run's parent
		ctx = tracing.Extract(ctx, handoff.PayloadTrace(body))
	}
	_, awaitUntil := handoff.PayloadAwait(body)
	if done, err := w.awaitParents(ctx, job, t, retried+1, awaitUntil); done {
		if err == nil { // skipped: the task ends
			w.markDone(ctx, t, adm.expiry)
			w.recordOutcome(ctx, t, end, nil)
		}
		return err
	}
	led := &ledgerWrite{w: w, t: t, expiry: adm.expiry}
	ow := &outcomeWrite{e: &w.engine, t: t}
	err = w.runTick(ctx, job, t, retried+1, true, runlog.Both(led.also, ow.also))
	if err != nil && retried >= job.MaxRetry && !errors.Is(err, asynq.SkipRetry) && !errors.Is(err, ErrRunsElsewhere) {
		err = fmt.Errorf("%w (last attempt: max_retry %d): %w", err, job.MaxRetry, asynq.SkipRetry)
	}
	if taskEnded(ctx, err, retried >= job.MaxRetry) {
		if !led.written {
			w.markDone(ctx, t, adm.expiry)
		}
		w.recordOutcome(ctx, t, end, ow)
	}
	return err
}

// asynqQueues is cfg.Worker.Queues with the namespace in each name.
func (w *Worker) asynqQueues() map[string]int {
	out := make(map[string]int, len(w.cfg.Worker.Queues))
	for q, p := range w.cfg.Worker.Queues {
		for _, lane := range w.cfg.QueueLanes(q) {
			out[lane] = p
		}
	}
	return out
}
