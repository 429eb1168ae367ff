package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/roster"
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

	srv     *asynq.Server
	ps      *redis.PubSub
	subDone chan struct{}
	started bool

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
// WithClock, WithPollIntervals, WithLocalOnly, WithLockMasters.
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
		},
		redisOpt:     queue,
		taskCheck:    o.taskCheck,
		delayedCheck: o.delayedCheck,
		version:      o.version,
		role:         o.role,
		localOnly:    o.localOnly,
		masters:      o.lockMasters,
	}
	w.choosePolicies()
	w.localCtx, w.localCancel = context.WithCancelCause(context.Background())
	return w
}

// Stats returns the worker's run counters.
func (w *Worker) Stats() Stats { return w.engine.Stats() }

// Start subscribes to the replace requests of the config's replace-policy
// jobs (one pub/sub connection) and starts the asynq server (unless
// WithLocalOnly): Concurrency and Queues from cfg.Worker, ShutdownTimeout =
// cfg.Worker.ShutdownGrace, retries delayed as backoffDelay says. It fails if
// Redis cannot be reached or the worker was started before.
func (w *Worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.closing {
		return errors.New("jobs: worker already started")
	}
	rdb, ok := w.redisOpt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return fmt.Errorf("jobs: worker: unsupported redis option %T", w.redisOpt)
	}
	w.rdb = rdb
	w.startRoster()
	if err := w.subscribeReplaceRequests(); err != nil {
		w.stopRoster(false)
		w.closeRedis()
		return err
	}
	if !w.localOnly {
		// asynq's connection, its cancel subscription moved off the shared
		// channel (see cancelRedirect); closed by closeRedis
		qc, _ := w.redisOpt.MakeRedisClient().(redis.UniversalClient)
		w.asynqRDB = qc
		w.srv = asynq.NewServerFromRedisClient(cancelRedirect{UniversalClient: qc, channel: asynqCancelRedirect(w.cfg.Namespace)}, asynq.Config{
			Concurrency:              w.cfg.Worker.Concurrency,
			Queues:                   w.asynqQueues(),
			ShutdownTimeout:          w.cfg.Worker.ShutdownGrace,
			RetryDelayFunc:           w.retryDelay,
			TaskCheckInterval:        w.taskCheck,
			DelayedTaskCheckInterval: w.delayedCheck,
			Logger:                   asynqLogger{w.log.With(slog.String("component", "asynq"))},
			ErrorHandler:             asynq.ErrorHandlerFunc(w.handleError),
			// a task handed back to a replica that can run it spends no attempt
			IsFailure: func(err error) bool { return !errors.Is(err, ErrHandedBack) },
		})
		if err := w.srv.Start(asynq.HandlerFunc(w.process)); err != nil {
			w.stopSubscriber()
			w.stopRoster(false)
			w.closeRedis()
			return fmt.Errorf("jobs: worker: %w", err)
		}
	}
	w.started = true
	return nil
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
//  5. The replace subscription and the Redis connections are closed.
//
// If ctx ends before that, every remaining run is cancelled at once and
// Shutdown still waits for the runs to return (and release their leases),
// then returns ctx's error. A Go handler that ignores its context holds
// Shutdown up. A worker that was never started holds nothing: Shutdown only
// marks it closed.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		return errors.New("jobs: worker already shut down")
	}
	w.closing = true
	w.mu.Unlock()

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
		err = fmt.Errorf("jobs: worker shutdown: %w", ctx.Err())
		w.localCancel(errShutdown)
		n := w.cancelRuns(errShutdown, func(string, *activeRun) bool { return true })
		w.log.Warn("shutdown deadline passed: cancelling the remaining runs", slog.Int("runs", n))
		<-done
	}
	w.localCancel(errShutdown)
	w.stopSubscriber()
	w.stopRoster(true)
	return errors.Join(err, w.closeRedis())
}

// cancelRedirect is the Redis client the worker's asynq server uses, with
// asynq's subscription to its cancel channel (asynq:cancel, shared by every
// deployment on the database, writable without a key) moved to a channel of
// this namespace that nothing publishes on. asynq would otherwise fail a
// task as soon as anyone published its ID there (and retry or archive it
// while its run goes on), and one deployment's cancel would hit another's
// task of the same job@tick. baton stops runs through its own signed
// replace requests.
type cancelRedirect struct {
	redis.UniversalClient
	channel string
}

// Subscribe subscribes to channels, asynq's cancel channel replaced.
func (c cancelRedirect) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	out := make([]string, len(channels))
	for i, ch := range channels {
		out[i] = ch
		if ch == asynqCancelChannel {
			out[i] = c.channel
		}
	}
	return c.UniversalClient.Subscribe(ctx, out...)
}

// closeRedis closes the worker's own Redis clients, if it has them.
func (w *Worker) closeRedis() error {
	if w.asynqRDB != nil {
		_ = w.asynqRDB.Close()
		w.asynqRDB = nil
	}
	if w.rdb == nil {
		return nil
	}
	err := w.rdb.Close()
	w.rdb = nil
	if err == nil || errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return fmt.Errorf("jobs: worker: close redis: %w", err)
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
		return errors.New("jobs: worker shutting down")
	case !w.started:
		return errors.New("jobs: worker not started")
	}
	w.wg.Go(func() {
		_ = w.runTick(w.localCtx, job, t, 1, false) // logged and counted by runTick
	})
	return nil
}

// process is the asynq handler of taskTypeRun tasks.
func (w *Worker) process(ctx context.Context, task *asynq.Task) error {
	w.wg.Add(1)
	defer w.wg.Done()
	t, err := handoff.ParseTask(task)
	if err != nil {
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
	if !ok || job.Mode != config.ModeCron {
		return w.cannotRun(ctx, t, job)
	}
	if err := w.validTick(t); err != nil {
		return err
	}
	retried, _ := asynq.GetRetryCount(ctx)
	if retried < 0 {
		return w.refuse(t, "a negative retry count", fmt.Errorf("retry count %d", retried))
	}
	adm, err := w.admit(ctx, job, t, handoff.PayloadExpiry(body))
	if err != nil {
		return err
	}
	if retried > job.MaxRetry {
		// asynq's budget is one above the job's (see newRunTask): a task
		// retried after a crash of its last allowed attempt ends here
		w.count(t.Job, func(c *counters) { c.failed.Add(1) })
		w.log.Error("retries exhausted: archiving the task", append(handoff.TickAttrs(t), slog.Int("retried", retried),
			slog.Int("max_retry", job.MaxRetry))...)
		w.markDone(ctx, t, adm.expiry)
		return fmt.Errorf("jobs: %s: retries exhausted (%d of max_retry %d): %w", t.ID(), retried, job.MaxRetry, asynq.SkipRetry)
	}
	err = w.runTick(ctx, job, t, retried+1, true)
	if err != nil && retried >= job.MaxRetry && !errors.Is(err, asynq.SkipRetry) && !errors.Is(err, ErrHandedBack) {
		err = fmt.Errorf("%w (last attempt: max_retry %d): %w", err, job.MaxRetry, asynq.SkipRetry)
	}
	if taskEnded(ctx, err, retried >= job.MaxRetry) {
		w.markDone(ctx, t, adm.expiry)
	}
	return err
}

// ErrRefused wraps why a worker refused a task it will never run: a bad
// or missing signature, a task ID that is not its tick's, a malformed run
// id or retry count.
var ErrRefused = errors.New("jobs: task refused")

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
var errNotDue = fmt.Errorf("tick not due yet by this worker's clock: %w", ErrHandedBack)

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
		return fmt.Errorf("jobs: %s: %s ahead: %w", t.ID(), ahead.Round(time.Millisecond), errNotDue)
	}
	return nil
}

// ErrHandedBack is what the worker returns for a task it cannot run (its job
// is not in this replica's job list, or not in cron mode) while a live
// replica can: asynq puts the task back after handBackDelay without
// counting an attempt, and a replica that knows the job runs it. It happens
// during rolling deploys, when replicas with different job lists run side by
// side.
var ErrHandedBack = errors.New("jobs: handed back to a replica that can run it")

// handBackDelay is how long a handed-back task waits before a worker may
// fetch it again.
const handBackDelay = time.Second

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
		return fmt.Errorf("jobs: %s: job %q is %s; roster unreadable: %w: %w", t.ID(), t.Job, why, err, ErrHandedBack)
	}
	if undecided {
		// no verdict off a stepped clock: decided after a heartbeat round
		w.log.Warn("cannot run this task here, and the queue Redis's clock stepped: handing it back until every live replica has beaten under the new clock",
			append(handoff.TickAttrs(t), slog.String("why", why), slog.String("queue", queue))...)
		return fmt.Errorf("jobs: %s: job %q is %s; the queue Redis's clock stepped, no replica is taken as dead for %s: %w",
			t.ID(), t.Job, why, roster.StepSuspend, ErrHandedBack)
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
	return fmt.Errorf("jobs: %s: job %q is %s; %s can run it: %w", t.ID(), t.Job, why, strings.Join(can, ", "), ErrHandedBack)
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

// asynqQueues is cfg.Worker.Queues with the namespace in each name.
func (w *Worker) asynqQueues() map[string]int {
	out := make(map[string]int, len(w.cfg.Worker.Queues))
	for q, p := range w.cfg.Worker.Queues {
		out[w.cfg.QueueName(q)] = p
	}
	return out
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

// retryDelay is the asynq RetryDelayFunc: backoffDelay of the task's job.
func (w *Worker) retryDelay(n int, err error, task *asynq.Task) time.Duration {
	if errors.Is(err, errNotDue) {
		if t, perr := handoff.ParseTask(task); perr == nil {
			return min(max(time.Until(t.At), handBackDelay), time.Minute)
		}
	}
	if errors.Is(err, ErrHandedBack) {
		return handBackDelay
	}
	backoff := 10 * time.Second // the job default, for tasks of unknown jobs
	if t, err := handoff.ParseTask(task); err == nil {
		if job, ok := w.cfg.Job(t.Job); ok {
			backoff = job.RetryBackoff
		}
	}
	return handoff.BackoffDelay(backoff, n)
}

// handleError is asynq's ErrorHandler: it logs every failed task with what
// asynq does next. runTick has logged the run's own failures already; this
// line also covers what asynq decides alone (its timeout, its lease).
func (w *Worker) handleError(ctx context.Context, task *asynq.Task, err error) {
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, _ := asynq.GetMaxRetry(ctx)
	id, _ := asynq.GetTaskID(ctx)
	if t, perr := handoff.ParseTask(task); perr == nil {
		if job, ok := w.cfg.Job(t.Job); ok && job.Mode == config.ModeCron {
			maxRetry = job.MaxRetry // asynq's is one above, for hand-backs
		}
	}
	next := "retry"
	switch {
	case errors.Is(err, ErrHandedBack):
		next = "hand back"
	case errors.Is(err, ErrReplaced):
		next = "archive (replaced)"
	case errors.Is(err, asynq.SkipRetry):
		next = "archive"
	case retried >= maxRetry:
		next = "archive (retries exhausted)"
	}
	attrs := []any{slog.String("task_id", id), slog.Int("retried", retried), slog.Int("max_retry", maxRetry),
		slog.String("next", next), slog.String("replica", w.replica), slog.Any("error", err)}
	if t, perr := handoff.ParseTask(task); perr == nil {
		attrs = append(handoff.TickAttrs(t)[:4], attrs...) // job, tick, run_id, dispatch fence
	}
	switch {
	case errors.Is(err, ErrRefused):
		return // logged by refuse, once per kind
	case errors.Is(err, ErrHandedBack):
		w.log.Debug("task handed back", attrs...)
		return
	case errors.Is(err, ErrReplaced):
		w.log.Info("task ended", attrs...)
		return
	}
	w.log.Warn("task failed", attrs...)
}

// asynqLogger adapts slog to asynq's Logger. Fatal logs at error level and
// does not exit (asynq itself never calls it).
type asynqLogger struct{ l *slog.Logger }

func (a asynqLogger) log(level slog.Level, args []any) {
	if a.l.Enabled(context.Background(), level) {
		a.l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprint(args...)))
	}
}

func (a asynqLogger) Debug(args ...any) { a.log(slog.LevelDebug, args) }
func (a asynqLogger) Info(args ...any)  { a.log(slog.LevelInfo, args) }
func (a asynqLogger) Warn(args ...any)  { a.log(slog.LevelWarn, args) }
func (a asynqLogger) Error(args ...any) { a.log(slog.LevelError, args) }
func (a asynqLogger) Fatal(args ...any) { a.log(slog.LevelError, args) }

var _ asynq.Logger = asynqLogger{}
