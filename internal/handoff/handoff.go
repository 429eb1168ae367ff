package handoff

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/tracing"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// LocalRunner starts a local-mode run in-process. RunLocal returns as soon as
// the run has started in its own goroutine (it does not wait for it to end);
// an error means it was not started (the runner is shutting down), so the
// scheduler leaves the tick for another try. *Worker implements it.
type LocalRunner interface {
	RunLocal(ctx context.Context, job *config.Job, t scheduler.Tick) error
}

// Sender hands claimed ticks to whatever runs them: cron-mode ticks are
// enqueued into asynq, local-mode ticks are started in-process through a
// LocalRunner. It implements scheduler.Dispatcher.
type Sender struct {
	cfg    *config.Config
	client *asynq.Client
	local  LocalRunner
	log    *slog.Logger
	rdb    redis.UniversalClient // the queue Redis; nil: no check across queues, no history
	moving func(job string) bool // jobs live replicas route differently; nil: none
	hist   *runlog.Writer
	enq    *enqueuer // the batched enqueue into the queue Redis; nil: asynq's client

	mu         sync.Mutex
	queues     []string    // asynq's queue names, as last read
	queuesAt   time.Time   // when they were read
	refreshing *queuesRead // the read in flight; nil: none

	await map[string]time.Time // WithParentsAwait; nil: none
}

var (
	_ scheduler.Dispatcher = (*Sender)(nil)
	_ scheduler.Recorder   = (*Sender)(nil)
)

// New returns a Sender for cfg's jobs. client enqueues cron-mode runs;
// local starts local-mode runs (nil: local ticks fail to dispatch). The
// client stays owned by the caller.
func New(cfg *config.Config, client *asynq.Client, local LocalRunner, opts ...Option) *Sender {
	d := &Sender{cfg: cfg, client: client, local: local, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(d)
	}
	d.hist = runlog.NewWriter(cfg, d.rdb, d.log)
	if d.rdb != nil {
		d.enq = newEnqueuer(d.rdb)
	}
	return d
}

// recordManual records a manual run's dispatch in the history. A scheduled
// tick's is not written here (it would cost a command per tick on the
// dispatch path): its run's first event, written by the worker that starts
// it, names the dispatching replica, and the tick's record on the lock
// masters says it was dispatched.
func (d *Sender) recordManual(ctx context.Context, t scheduler.Tick) {
	if t.Manual {
		d.hist.Dispatched(ctx, t)
	}
}

// NotDispatched records in the run history (with WithQueueRedis) that tick
// t was paused or missed, and why. It implements scheduler.Recorder.
//
// A missed tick of a job with max_runs that was counted (a hand-off that
// failed with its task nowhere) is counted back.
func (d *Sender) NotDispatched(ctx context.Context, t scheduler.Tick, paused bool, reason string) {
	st := jobs.StatusMissed
	if paused {
		st = jobs.StatusPaused
	}
	d.hist.Decided(ctx, t, string(st), reason)
	if d.rdb != nil {
		// a job run after this one learns that this tick will not run
		if err := chain.Record(ctx, d.rdb, d.cfg.Namespace, t.Job, t.At, OutcomeTTL(d.cfg, t.Job), chain.Outcome{Status: st, Reason: reason}); err != nil {
			d.log.Warn("cannot write the tick's outcome record: the jobs run after it wait for it until their starting deadline",
				append(TickAttrs(t), slog.Any("error", err))...)
		}
	}
	if job, ok := d.cfg.Job(t.Job); ok && job.MaxRuns > 0 && !paused && d.rdb != nil {
		d.uncount(ctx, job, t)
	}
}

// Dispatch hands tick t off, once per tick ID:
//
//   - mode cron: enqueues the task NewRunTask builds (task ID t.ID()). If asynq
//     answers ErrTaskIDConflict the tick is already enqueued (or retained after
//     its run) and Dispatch returns nil: exactly once holds.
//   - mode local: calls RunLocal, which starts the run in-process.
//
// With WithQueueRedis, each tick is bound to one queue (or to a local run)
// before it is enqueued, when asynq knows more than one queue: a replica
// with another job list (a rolling deploy that moved the job) enqueues the
// tick into the queue it is bound to, under the same task ID, so asynq
// dedupes the two; a local job bound to a queue is not run locally
// (ErrAlreadyDispatched), and a cron job bound to a local run is not
// enqueued. See boundElsewhere.
//
// Other errors (an unknown job, a singleton job, a failed enqueue) are
// returned wrapped, naming the tick ID; cancelling ctx abandons the enqueue.
//
// A job with max_runs has each scheduled tick counted before it is handed
// off (manual runs are not): once max_runs ticks were, Dispatch returns
// scheduler.ErrJobDone; a tick whose hand-off fails is counted back.
func (d *Sender) Dispatch(ctx context.Context, t scheduler.Tick) error {
	job, ok := d.cfg.Job(t.Job)
	if !ok {
		return fmt.Errorf("handoff: dispatch %s: unknown job", t.ID())
	}
	if job.MaxRuns > 0 && !t.Manual {
		return d.dispatchCounted(ctx, job, t)
	}
	return d.dispatch(ctx, job, t)
}

// dispatch hands tick t of job off (see Dispatch), by the job's mode.
func (d *Sender) dispatch(ctx context.Context, job *config.Job, t scheduler.Tick) error {
	switch job.Mode {
	case config.ModeCron:
		return d.dispatchCron(ctx, job, t)
	case config.ModeLocal:
		return d.dispatchLocal(ctx, job, t)
	}
	return fmt.Errorf("handoff: dispatch %s: mode %s is not dispatched by ticks", t.ID(), job.Mode)
}

// dispatchCron enqueues tick t of cron-mode job into its queue, or into
// the queue the tick is bound to by a replica with another job list; a
// tick bound to a local run is not enqueued.
func (d *Sender) dispatchCron(ctx context.Context, job *config.Job, t scheduler.Tick) error {
	bound, err := d.boundElsewhere(ctx, t, job.Queue, d.cfg.Retention(job), d.isMoving(job.Name))
	switch {
	case err != nil:
		return fmt.Errorf("handoff: dispatch %s: %w", t.ID(), err)
	case bound.local:
		return fmt.Errorf("handoff: dispatch %s: run locally by a replica with another job list: %w", t.ID(), scheduler.ErrAlreadyDispatched)
	case bound.queue != "":
		// bound to another queue by a dispatcher with another job list:
		// enqueued there under the same ID, which dedupes with its
		// enqueue whether it has landed yet or not
		return d.enqueue(ctx, job, t, bound.queue, "")
	}
	return d.enqueue(ctx, job, t, job.Queue, "")
}

// dispatchLocal starts tick t of local-mode job in this process, unless a
// replica whose list has the job in cron mode bound the tick to a queue:
// then the tick goes into that queue under the same ID (its enqueue may
// have failed or be slow to land; asynq dedupes).
func (d *Sender) dispatchLocal(ctx context.Context, job *config.Job, t scheduler.Tick) error {
	if d.local == nil {
		return fmt.Errorf("handoff: dispatch %s: local job, but no local runner", t.ID())
	}
	bound, err := d.boundElsewhere(ctx, t, "", d.cfg.Retention(job), d.isMoving(job.Name))
	switch {
	case err != nil:
		// the queue Redis failing must not stop local runs, which work
		// without it; the tick is already recorded, so not running it
		// would lose it
		d.log.Warn("cannot check whether a local tick was enqueued by a replica with another job list; running it",
			append(TickAttrs(t), slog.Any("error", err))...)
	case bound.queue != "" && d.client != nil:
		return d.enqueue(ctx, job, t, bound.queue, " (bound there by a replica with another job list)")
	case bound.queue != "":
		return fmt.Errorf("handoff: dispatch %s: in queue %q: %w", t.ID(), bound.queue, scheduler.ErrAlreadyDispatched)
	}
	if err := d.local.RunLocal(ctx, job, t); err != nil {
		if d.rdb != nil {
			// the binding to a local run promised a run that did not
			// start: drop it (if still ours) so another dispatch is not
			// turned away by it
			_ = unbindLocal.Run(context.WithoutCancel(ctx), d.rdb, []string{bindingKey(d.cfg.Namespace, t)}).Err()
		}
		return fmt.Errorf("handoff: dispatch %s: %w", t.ID(), err)
	}
	d.recordManual(ctx, t)
	return nil
}

// enqueue enqueues tick t of job into queue (a config queue name) as a
// cron-mode task with ID t.ID(): a task already there under that ID is
// ErrAlreadyDispatched (exactly once holds). why says, in a failed
// enqueue's error, why the tick went to that queue ("": its own).
func (d *Sender) enqueue(ctx context.Context, job *config.Job, t scheduler.Tick, queue, why string) error {
	in := *job
	in.Mode, in.Queue = config.ModeCron, queue
	// the dispatch's span, if traced, becomes the run's parent
	err := d.enqueueTask(ctx, &in, t)
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		return fmt.Errorf("handoff: dispatch %s: in queue %q: %w", t.ID(), queue, scheduler.ErrAlreadyDispatched)
	case err != nil:
		return fmt.Errorf("handoff: dispatch %s: enqueue into %q%s: %w", t.ID(), queue, why, err)
	}
	if job.Mode == config.ModeLocal {
		d.log.Info("local tick enqueued into the queue a replica with another job list bound it to", append(TickAttrs(t), slog.String("queue", queue))...)
	} else {
		d.log.Debug("tick enqueued", append(TickAttrs(t), slog.String("queue", queue))...)
	}
	d.recordManual(ctx, t)
	return nil
}

// enqueueTask puts the task of tick t of cron-mode job into its queue:
// with the queue Redis, through the hand-off's own enqueue, batched with
// the ticks enqueued at the same time (enqueue.go); else through asynq's
// client. A task with its ID in the queue already is asynq's
// ErrTaskIDConflict either way.
func (d *Sender) enqueueTask(ctx context.Context, job *config.Job, t scheduler.Tick) error {
	if d.enq != nil {
		m, err := runTaskMessage(d.cfg, job, t, time.Now(), d.extras(ctx, job))
		if err != nil {
			return err
		}
		return d.enq.enqueue(ctx, m)
	}
	task, err := newRunTask(d.cfg, job, t, time.Now(), d.extras(ctx, job))
	if err != nil {
		return err
	}
	_, err = d.client.EnqueueContext(ctx, task)
	return err
}

// extras are what the payload of job's task carries beyond its tick: the
// dispatch's span, if traced (it becomes the run's parent), and the wait
// for its parents a chain's backfill gave the job (WithParentsAwait).
func (d *Sender) extras(ctx context.Context, job *config.Job) taskExtras {
	return taskExtras{trace: tracing.Inject(ctx), await: d.await[job.Name]}
}

// queuesFresh is how old the dispatcher's list of asynq's queues may be.
const queuesFresh = 250 * time.Millisecond

// asynqQueues returns asynq's queue names, read at most queuesFresh ago.
// One dispatch reads them when they are stale; the dispatches that find the
// read in flight wait for it (one round trip) and take what it read, even
// when the read took longer than queuesFresh (a reply is never fresher than
// its round trip): a thousand ticks due at once cost one read, and none
// waits on a lock. Another's read that failed is made again by a waiter
// whose own context still runs; a waiter's own failed read is its error.
func (d *Sender) asynqQueues(ctx context.Context) ([]string, error) {
	for {
		d.mu.Lock()
		if time.Since(d.queuesAt) <= queuesFresh {
			names := d.queues
			d.mu.Unlock()
			return names, nil
		}
		r, mine := d.refreshing, false
		if r == nil {
			r, mine = &queuesRead{done: make(chan struct{})}, true
			d.refreshing = r
			d.mu.Unlock()
			d.readQueues(ctx, r)
		} else {
			d.mu.Unlock()
			select {
			case <-r.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("read asynq's queues: %w", ctx.Err())
			}
		}
		if r.err == nil {
			return r.names, nil
		}
		if mine || ctx.Err() != nil {
			return nil, fmt.Errorf("read asynq's queues: %w", r.err)
		}
		// another's read failed (perhaps on its reader's context): read again
	}
}

// queuesRead is one read of asynq's queue names and what it brought.
type queuesRead struct {
	done  chan struct{} // closed when the read ended
	names []string
	err   error
}

// readQueues makes read r, keeps what it brought as the names of its
// sending time, and ends it.
func (d *Sender) readQueues(ctx context.Context, r *queuesRead) {
	at := time.Now()
	r.names, r.err = d.rdb.SMembers(ctx, AsynqQueuesKey).Result()
	d.mu.Lock()
	if r.err == nil && at.After(d.queuesAt) {
		d.queues, d.queuesAt = r.names, at
	}
	d.refreshing = nil
	d.mu.Unlock()
	close(r.done)
}

var (
	//go:embed lua/bind_queue.lua
	bindQueueSrc string
	bindQueue    = redis.NewScript(bindQueueSrc)
)

// boundElsewhere binds tick t to a queue before it is enqueued into target
// (a queue, or "" for a local run) and returns the queue it is bound to
// when that is not target: the tick is dispatched there, or about to be.
// The binding is one script on the queue Redis: two dispatchers of one tick
// with different job lists (a rolling deploy that moves the job) agree on
// one queue even when one's enqueue is slow to land. It is made only when
// asynq knows a queue other than target (one round trip), and without a
// queue Redis client not at all; force makes it also when asynq knows no
// other queue (the job is moving: WithMovingJobs). On a Redis Cluster, where the script's
// keys live in different slots, the other queues are only looked at, which
// leaves a slow enqueue's window open.
func (d *Sender) boundElsewhere(ctx context.Context, t scheduler.Tick, target string, retention time.Duration, force bool) (elsewhere, error) {
	if d.rdb == nil {
		return elsewhere{}, nil
	}
	names, err := d.asynqQueues(ctx)
	if err != nil {
		return elsewhere{}, err
	}
	var others []string // this namespace's other queues, config names
	for _, name := range names {
		if q, ours := d.cfg.QueueOf(name); ours && q != target && !slices.Contains(others, q) {
			others = append(others, q)
		}
	}
	if len(others) == 0 && !force {
		return elsewhere{}, nil
	}
	keys := make([]string, 0, len(others)+1)
	keys = append(keys, bindingKey(d.cfg.Namespace, t))
	args := make([]any, 0, len(others)+2)
	args = append(args, target, max(retention, time.Minute).Milliseconds())
	for _, q := range others {
		keys = append(keys, AsynqTaskKey(d.cfg.QueueFor(q, t.Job), t.ID()))
		args = append(args, q)
	}
	if _, cluster := d.rdb.(*redis.ClusterClient); cluster {
		q, err := d.queueHolding(ctx, others, t)
		return elsewhere{queue: q}, err
	}
	q, err := bindQueue.Run(ctx, d.rdb, keys, args...).Text()
	switch {
	case err != nil:
		return elsewhere{}, fmt.Errorf("bind the tick to a queue: %w", err)
	case q == target:
		return elsewhere{}, nil
	case q == "":
		return elsewhere{local: true}, nil
	}
	return elsewhere{queue: q}, nil
}

// elsewhere is where boundElsewhere found a tick bound when that is not
// where its dispatcher sends it: a queue, or a local run on a replica whose
// job list has the job in local mode. The zero value is nowhere else.
type elsewhere struct {
	queue string // the queue (config name) the tick is bound to, if any
	local bool   // the tick is bound to a local run
}

// unbindLocal deletes a binding to a local run ("").
var unbindLocal = redis.NewScript(`if redis.call('GET', KEYS[1]) == '' then return redis.call('DEL', KEYS[1]) end return 0`)

func (d *Sender) isMoving(job string) bool { return d.moving != nil && d.moving(job) }

// TickAttrs are the log attributes of a dispatched tick.
func TickAttrs(t scheduler.Tick) []any {
	return []any{
		slog.String("job", t.Job),
		slog.String("tick", t.At.UTC().Format("2006-01-02T15:04:05Z07:00")),
		slog.String("run_id", t.RunID),
		slog.Int64("fence", t.Fence),
		slog.String("replica", t.Replica),
	}
}
