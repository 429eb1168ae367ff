package handoff

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/runlog"
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

	mu         sync.Mutex
	queues     []string      // asynq's queue names, as last read
	queuesAt   time.Time     // when they were read
	refreshing chan struct{} // closed when the read in flight ends; nil: none
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
		return fmt.Errorf("jobs: dispatch %s: unknown job", t.ID())
	}
	if job.MaxRuns == 0 || t.Manual {
		return d.dispatch(ctx, job, t)
	}
	added, count, err := d.countRun(ctx, job, t)
	if errors.Is(err, scheduler.ErrJobDone) {
		return d.doneHere(ctx, job, count, err)
	}
	if err != nil {
		return err
	}
	err = d.dispatch(ctx, job, t)
	if err != nil && added && !errors.Is(err, scheduler.ErrAlreadyDispatched) {
		d.uncount(context.WithoutCancel(ctx), job, t)
	}
	return err
}

// uncount takes back the count of tick t of job (max_runs) when no queue of
// this namespace holds its task: a failed enqueue whose reply was lost may
// have landed, and a tick counted back while its task exists would let one
// more tick run than max_runs. When that cannot be read the count stays
// (the job may stop one run short; it never runs one too many).
func (d *Sender) uncount(ctx context.Context, job *config.Job, t scheduler.Tick) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	held, err := d.taskEnqueued(ctx, t, job.Queue)
	switch {
	case err != nil:
		d.log.Warn("cannot tell whether a tick whose hand-off failed is in a queue: it stays counted toward max_runs (the job may stop one run short)",
			append(TickAttrs(t), slog.Any("error", err))...)
		return
	case held:
		return // enqueued after all: counted rightly
	}
	if err := maxRunsUndo.Run(ctx, d.rdb, RunCountKeys(d.cfg.Namespace, job.Name), t.ID()).Err(); err != nil {
		d.log.Warn("cannot take back the count of a tick not dispatched: the job may stop one run short of max_runs",
			append(TickAttrs(t), slog.Any("error", err))...)
	}
}

// taskEnqueued tells whether some asynq queue of this namespace holds tick
// t's task (pending, running, retried, archived or completed and retained);
// own is the job's queue (config name), looked at even when asynq's list of
// queues (read at most queuesFresh ago) does not name it yet.
func (d *Sender) taskEnqueued(ctx context.Context, t scheduler.Tick, own string) (bool, error) {
	names, err := d.asynqQueues(ctx)
	if err != nil {
		return false, err
	}
	queues := []string{own}
	for _, name := range names {
		if q, ours := d.cfg.QueueOf(name); ours && q != own {
			queues = append(queues, q)
		}
	}
	q, err := d.queueHolding(ctx, queues, t.ID())
	return q != "", err
}

// queueHolding returns the first of queues (config names) in which asynq
// holds the task with id, or "" if none does: one pipelined round trip.
func (d *Sender) queueHolding(ctx context.Context, queues []string, id string) (string, error) {
	if len(queues) == 0 {
		return "", nil
	}
	pipe := d.rdb.Pipeline()
	found := make([]*redis.IntCmd, len(queues))
	for i, q := range queues {
		found[i] = pipe.Exists(ctx, AsynqTaskKey(d.cfg.QueueName(q), id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return "", fmt.Errorf("look for the tick's task: %w", err)
	}
	for i, c := range found {
		if c.Val() > 0 {
			return queues[i], nil
		}
	}
	return "", nil
}

// countRun counts tick t of job, which has max_runs, on the queue Redis.
// added says this call counted it (a tick counted before is dispatched
// again without counting: an owner that took over); count is the job's
// count. It returns an error wrapping scheduler.ErrJobDone when the job had
// its max_runs ticks.
func (d *Sender) countRun(ctx context.Context, job *config.Job, t scheduler.Tick) (added bool, count int64, err error) {
	if d.rdb == nil {
		return false, 0, fmt.Errorf("jobs: dispatch %s: max_runs needs the queue Redis to count runs (WithQueueRedis)", t.ID())
	}
	keys := RunCountKeys(d.cfg.Namespace, job.Name)
	res, err := maxRuns.Run(ctx, d.rdb, keys,
		t.ID(), t.At.UnixMilli(), job.MaxRuns, d.cfg.Retention(job).Milliseconds()).Slice()
	if err == nil && len(res) < 2 {
		err = fmt.Errorf("malformed reply %v", res)
	}
	if err != nil {
		return false, 0, fmt.Errorf("jobs: dispatch %s: count toward max_runs: %w", t.ID(), err)
	}
	if v, ok := res[1].(string); ok {
		return false, 0, fmt.Errorf("jobs: dispatch %s: %w", t.ID(), CorruptCount(keys[0], v))
	}
	count, _ = res[1].(int64)
	if st, _ := res[0].(int64); st == 0 {
		return false, count, fmt.Errorf("jobs: dispatch %s: the job ran its max_runs (%d) ticks: %w", t.ID(), job.MaxRuns, scheduler.ErrJobDone)
	}
	if len(res) < 3 {
		return false, count, nil
	}
	n, _ := res[2].(int64)
	return n == 1, count, nil
}

// CorruptCount is the error for a run count key that holds v, no count.
func CorruptCount(key, v string) error {
	return &jobs.CorruptError{Key: key, Value: redact.Cut(v), Want: "an integer from 0 to 2^53-2 (the job's run count toward max_runs)"}
}

// Precheck tells, before a local job's tick is recorded as dispatched,
// whether this list's max_runs leaves it to another list (see doneHere);
// it reads the count and counts nothing. It implements
// scheduler.Prechecker.
func (d *Sender) Precheck(ctx context.Context, t scheduler.Tick) error {
	job, ok := d.cfg.Job(t.Job)
	if !ok || job.MaxRuns == 0 || t.Manual || d.rdb == nil {
		return nil
	}
	v, err := d.rdb.Get(ctx, RunCountKeys(d.cfg.Namespace, job.Name)[0]).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jobs: dispatch %s: read the max_runs count: %w", t.ID(), err)
	}
	count, ok := quorum.ParseCounter(v)
	if !ok {
		return fmt.Errorf("jobs: dispatch %s: %w", t.ID(), CorruptCount(RunCountKeys(d.cfg.Namespace, job.Name)[0], v))
	}
	if count < int64(job.MaxRuns) {
		return nil
	}
	return d.doneHere(ctx, job, count, fmt.Errorf("jobs: dispatch %s: the job ran its max_runs (%d) ticks: %w", t.ID(), job.MaxRuns, scheduler.ErrJobDone))
}

// doneHere decides a tick that this job list's max_runs refuses after count
// counted ticks. A limit is decided per deployment, not per list: while a
// live replica that claims ticks runs a list that would still take it (a
// rolling deploy raised or removed max_runs), the tick is left to it
// (scheduler.ErrLeftToOthers: released, not recorded); otherwise done is
// returned (it wraps scheduler.ErrJobDone). Replicas of versions that do
// not publish their limits count as not taking it (what they decide, they
// decide by their own list). A replica counts as live by the queue Redis's
// clock or when it beat within the liveness window of the newest heartbeat
// (a short step of that clock, not yet seen by a heartbeat, moves every
// entry's age alike). A roster that cannot be read, or that shows no
// live replica (this one's own heartbeat not among them: the queue Redis's
// clock stepped), leaves the tick undecided: an error, and the tick is
// tried again.
func (d *Sender) doneHere(ctx context.Context, job *config.Job, count int64, done error) error {
	members, err := roster.Read(ctx, d.rdb, d.cfg.Namespace)
	if err != nil {
		return fmt.Errorf("jobs: %s reached max_runs here; whether another job list takes its tick is unknown: %w", job.Name, err)
	}
	if roster.Stale(members) {
		return fmt.Errorf("jobs: %s reached max_runs here; the roster shows no live replica, this one included (the queue Redis's clock stepped forward?): whether another job list takes its tick is decided after a heartbeat", job.Name)
	}
	// live by the queue Redis's clock, or by the newest heartbeat: a step
	// forward of that clock shorter than the liveness window, before a
	// heartbeat has seen it, makes a member that beat a little before this
	// one look dead while this one looks live (not stale), but moves no
	// heartbeat against another
	var newest time.Time
	for _, m := range members {
		if m.Seen.After(newest) {
			newest = m.Seen
		}
	}
	for _, m := range members {
		if !m.Live && newest.Sub(m.Seen) > roster.LiveWindow || m.Role == "worker" || !m.LimitsKnown {
			continue
		}
		l, ok := m.Jobs[job.Name]
		if !ok || (l.Mode != config.ModeCron && l.Mode != config.ModeLocal) {
			continue
		}
		if limit := m.MaxRuns[job.Name]; limit == 0 || int64(limit) > count {
			what := "no max_runs"
			if limit > 0 {
				what = fmt.Sprintf("max_runs %d", limit)
			}
			return fmt.Errorf("jobs: %s ran %d ticks, its max_runs here (%d), but replica %s's job list has %s: %w",
				job.Name, count, job.MaxRuns, m.ID, what, scheduler.ErrLeftToOthers)
		}
	}
	return done
}

// dispatch hands tick t of job off (see Dispatch).
func (d *Sender) dispatch(ctx context.Context, job *config.Job, t scheduler.Tick) error {
	switch job.Mode {
	case config.ModeCron:
		task, err := NewRunTask(d.cfg, job, t)
		if err != nil {
			return err
		}
		queue := job.Queue
		bound, err := d.boundElsewhere(ctx, t, job.Queue, d.cfg.Retention(job), d.isMoving(job.Name))
		switch q := bound.queue; {
		case err != nil:
			return fmt.Errorf("jobs: dispatch %s: %w", t.ID(), err)
		case bound.local:
			return fmt.Errorf("jobs: dispatch %s: run locally by a replica with another job list: %w", t.ID(), scheduler.ErrAlreadyDispatched)
		case q != "":
			// bound to another queue by a dispatcher with another job list:
			// enqueued there under the same ID, which dedupes with its
			// enqueue whether it has landed yet or not
			queue = q
			moved := *job
			moved.Queue = q
			if task, err = NewRunTask(d.cfg, &moved, t); err != nil {
				return err
			}
		}
		_, err = d.client.EnqueueContext(ctx, task)
		switch {
		case errors.Is(err, asynq.ErrTaskIDConflict):
			return fmt.Errorf("jobs: dispatch %s: in queue %q: %w", t.ID(), queue, scheduler.ErrAlreadyDispatched)
		case err != nil:
			return fmt.Errorf("jobs: dispatch %s: enqueue into %q: %w", t.ID(), queue, err)
		}
		d.log.Debug("tick enqueued", append(TickAttrs(t), slog.String("queue", queue))...)
		d.recordManual(ctx, t)
		return nil
	case config.ModeLocal:
		if d.local == nil {
			return fmt.Errorf("jobs: dispatch %s: local job, but no local runner", t.ID())
		}
		bound, err := d.boundElsewhere(ctx, t, "", d.cfg.Retention(job), d.isMoving(job.Name))
		switch q := bound.queue; {
		case err != nil:
			// the queue Redis failing must not stop local runs, which work
			// without it; the tick is already recorded, so not running it
			// would lose it
			d.log.Warn("cannot check whether a local tick was enqueued by a replica with another job list; running it",
				append(TickAttrs(t), slog.Any("error", err))...)
		case q != "" && d.client != nil:
			// bound to a queue by a replica whose list has the job in cron
			// mode: its enqueue may have failed or be slow to land, so the
			// tick goes into that queue under the same ID (asynq dedupes)
			moved := *job
			moved.Mode, moved.Queue = config.ModeCron, q
			task, err := NewRunTask(d.cfg, &moved, t)
			if err != nil {
				return err
			}
			_, err = d.client.EnqueueContext(ctx, task)
			switch {
			case errors.Is(err, asynq.ErrTaskIDConflict):
				return fmt.Errorf("jobs: dispatch %s: in queue %q: %w", t.ID(), q, scheduler.ErrAlreadyDispatched)
			case err != nil:
				return fmt.Errorf("jobs: dispatch %s: enqueue into %q (bound there by a replica with another job list): %w", t.ID(), q, err)
			}
			d.log.Info("local tick enqueued into the queue a replica with another job list bound it to", append(TickAttrs(t), slog.String("queue", q))...)
			d.recordManual(ctx, t)
			return nil
		case q != "":
			return fmt.Errorf("jobs: dispatch %s: in queue %q: %w", t.ID(), q, scheduler.ErrAlreadyDispatched)
		}
		if err := d.local.RunLocal(ctx, job, t); err != nil {
			if d.rdb != nil {
				// the binding to a local run promised a run that did not
				// start: drop it (if still ours) so another dispatch is not
				// turned away by it
				_ = unbindLocal.Run(context.WithoutCancel(ctx), d.rdb, []string{bindingKey(d.cfg.Namespace, t)}).Err()
			}
			return fmt.Errorf("jobs: dispatch %s: %w", t.ID(), err)
		}
		d.recordManual(ctx, t)
		return nil
	default:
		return fmt.Errorf("jobs: dispatch %s: mode %s is not dispatched by ticks", t.ID(), job.Mode)
	}
}

// queuesFresh is how old the dispatcher's list of asynq's queues may be.
const queuesFresh = 250 * time.Millisecond

// asynqQueues returns asynq's queue names, read at most queuesFresh ago.
// One dispatch reads them when they are stale; the dispatches that find the
// read in flight wait for it (one round trip) rather than read too, so a
// thousand ticks due at once cost one read, and none waits on a lock.
func (d *Sender) asynqQueues(ctx context.Context) ([]string, error) {
	for {
		d.mu.Lock()
		names, stale, inflight := d.queues, time.Since(d.queuesAt) > queuesFresh, d.refreshing
		if stale && inflight == nil {
			d.refreshing = make(chan struct{})
			inflight = d.refreshing
			d.mu.Unlock()
			break
		}
		d.mu.Unlock()
		if !stale {
			return names, nil
		}
		select {
		case <-inflight: // read again: fresh now, unless that read failed
		case <-ctx.Done():
			return nil, fmt.Errorf("read asynq's queues: %w", ctx.Err())
		}
	}
	at := time.Now()
	fresh, err := d.rdb.SMembers(ctx, AsynqQueuesKey).Result()
	d.mu.Lock()
	if err == nil && at.After(d.queuesAt) {
		d.queues, d.queuesAt = fresh, at
	}
	close(d.refreshing)
	d.refreshing = nil
	d.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("read asynq's queues: %w", err)
	}
	return fresh, nil
}

var (
	//go:embed lua/max_runs.lua
	maxRunsSrc string
	maxRuns    = redis.NewScript(maxRunsSrc)
	//go:embed lua/max_runs_undo.lua
	maxRunsUndoSrc string
	maxRunsUndo    = redis.NewScript(maxRunsUndoSrc)

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
		if q, ours := d.cfg.QueueOf(name); ours && q != target {
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
		keys = append(keys, AsynqTaskKey(d.cfg.QueueName(q), t.ID()))
		args = append(args, q)
	}
	if _, cluster := d.rdb.(*redis.ClusterClient); cluster {
		q, err := d.queueHolding(ctx, others, t.ID())
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
