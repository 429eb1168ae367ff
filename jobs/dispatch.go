package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/scheduler"
)

// LocalRunner starts a local-mode run in-process. RunLocal returns as soon as
// the run has started in its own goroutine (it does not wait for it to end);
// an error means it was not started (the runner is shutting down), so the
// scheduler leaves the tick for another try. *Worker implements it.
type LocalRunner interface {
	RunLocal(ctx context.Context, job *Job, t scheduler.Tick) error
}

// Dispatcher hands claimed ticks to whatever runs them: cron-mode ticks are
// enqueued into asynq, local-mode ticks are started in-process through a
// LocalRunner. It implements scheduler.Dispatcher.
type Dispatcher struct {
	cfg    *Config
	client *asynq.Client
	local  LocalRunner
	log    *slog.Logger
	rdb    redis.UniversalClient // the queue Redis; nil: no check across queues

	mu       sync.Mutex
	queues   []string  // asynq's queue names, as last read
	queuesAt time.Time // when they were read
}

// DispatcherOption configures a Dispatcher.
type DispatcherOption func(*Dispatcher)

// WithQueueRedis gives the dispatcher a client of the queue Redis (the one
// the asynq client enqueues into), so it can keep a tick's exactly-once
// across queues: asynq refuses a task ID twice only within one queue, and
// replicas with different job lists (a rolling deploy that moves a job to
// another queue, or from cron to local mode) could otherwise enqueue one
// tick into two queues, or run it locally after it was enqueued.
func WithQueueRedis(rdb redis.UniversalClient) DispatcherOption {
	return func(d *Dispatcher) { d.rdb = rdb }
}

var _ scheduler.Dispatcher = (*Dispatcher)(nil)

// NewDispatcher returns a Dispatcher for cfg's jobs. client enqueues cron-mode
// runs; local starts local-mode runs (nil: local ticks fail to dispatch); log
// may be nil (no logging). The client stays owned by the caller.
func NewDispatcher(cfg *Config, client *asynq.Client, local LocalRunner, log *slog.Logger, opts ...DispatcherOption) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dispatcher{cfg: cfg, client: client, local: local, log: log}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Dispatch hands tick t off, once per tick ID:
//
//   - mode cron: enqueues the task NewRunTask builds (task ID t.ID()). If asynq
//     answers ErrTaskIDConflict the tick is already enqueued (or retained after
//     its run) and Dispatch returns nil: exactly once holds.
//   - mode local: calls RunLocal, which starts the run in-process.
//
// With WithQueueRedis, a tick already enqueued in another asynq queue (a
// replica with an older or newer job list dispatched it there) is not
// enqueued or run again: Dispatch returns ErrAlreadyDispatched. The check
// costs one round trip, made only when asynq knows a queue other than the
// job's (for a local job: any queue).
//
// Other errors (an unknown job, a singleton job, a failed enqueue) are
// returned wrapped, naming the tick ID; cancelling ctx abandons the enqueue.
func (d *Dispatcher) Dispatch(ctx context.Context, t scheduler.Tick) error {
	job, ok := d.cfg.Job(t.Job)
	if !ok {
		return fmt.Errorf("jobs: dispatch %s: unknown job", t.ID())
	}
	switch job.Mode {
	case ModeCron:
		task, err := NewRunTask(d.cfg, job, t)
		if err != nil {
			return err
		}
		q, err := d.enqueuedElsewhere(ctx, t, job.Queue)
		switch {
		case err != nil:
			return fmt.Errorf("jobs: dispatch %s: %w", t.ID(), err)
		case q != "":
			return fmt.Errorf("jobs: dispatch %s: in queue %q: %w", t.ID(), q, scheduler.ErrAlreadyDispatched)
		}
		_, err = d.client.EnqueueContext(ctx, task)
		switch {
		case errors.Is(err, asynq.ErrTaskIDConflict):
			return fmt.Errorf("jobs: dispatch %s: %w", t.ID(), scheduler.ErrAlreadyDispatched)
		case err != nil:
			return fmt.Errorf("jobs: dispatch %s: enqueue: %w", t.ID(), err)
		}
		d.log.Debug("tick enqueued", append(tickAttrs(t), slog.String("queue", job.Queue))...)
		return nil
	case ModeLocal:
		if d.local == nil {
			return fmt.Errorf("jobs: dispatch %s: local job, but no local runner", t.ID())
		}
		q, err := d.enqueuedElsewhere(ctx, t, "")
		switch {
		case err != nil:
			// the queue Redis failing must not stop local runs, which work
			// without it; the tick is already recorded, so not running it
			// would lose it
			d.log.Warn("cannot check whether a local tick was enqueued by a replica with another job list; running it",
				append(tickAttrs(t), slog.Any("error", err))...)
		case q != "":
			return fmt.Errorf("jobs: dispatch %s: in queue %q: %w", t.ID(), q, scheduler.ErrAlreadyDispatched)
		}
		if err := d.local.RunLocal(ctx, job, t); err != nil {
			return fmt.Errorf("jobs: dispatch %s: %w", t.ID(), err)
		}
		return nil
	default:
		return fmt.Errorf("jobs: dispatch %s: mode %s is not dispatched by ticks", t.ID(), job.Mode)
	}
}

// queuesFresh is how old the dispatcher's list of asynq's queues may be.
const queuesFresh = 250 * time.Millisecond

// enqueuedElsewhere returns the asynq queue other than own where tick t's
// task exists ("" if none, or without a queue Redis client).
func (d *Dispatcher) enqueuedElsewhere(ctx context.Context, t scheduler.Tick, own string) (string, error) {
	if d.rdb == nil {
		return "", nil
	}
	d.mu.Lock()
	if time.Since(d.queuesAt) > queuesFresh {
		names, err := d.rdb.SMembers(ctx, asynqQueuesKey).Result()
		if err != nil {
			d.mu.Unlock()
			return "", fmt.Errorf("read asynq's queues: %w", err)
		}
		d.queues, d.queuesAt = names, time.Now()
	}
	var others []string
	for _, q := range d.queues {
		if q != own {
			others = append(others, q)
		}
	}
	d.mu.Unlock()
	if len(others) == 0 {
		return "", nil
	}
	pipe := d.rdb.Pipeline()
	found := make([]*redis.IntCmd, len(others))
	for i, q := range others {
		found[i] = pipe.Exists(ctx, asynqTaskKey(q, t.ID()))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return "", fmt.Errorf("look for the tick's task in other queues: %w", err)
	}
	for i, c := range found {
		if c.Val() > 0 {
			return others[i], nil
		}
	}
	return "", nil
}

// asynq's Redis layout (v0.2x), which the dispatcher reads to find a task
// ID in another queue; TestAsynqKeyLayout guards it.
const asynqQueuesKey = "asynq:queues"

func asynqTaskKey(queue, id string) string { return "asynq:{" + queue + "}:t:" + id }

// tickAttrs are the log attributes of a dispatched tick.
func tickAttrs(t scheduler.Tick) []any {
	return []any{
		slog.String("job", t.Job),
		slog.String("tick", t.At.UTC().Format("2006-01-02T15:04:05Z07:00")),
		slog.String("run_id", t.RunID),
		slog.Int64("fence", t.Fence),
		slog.String("replica", t.Replica),
	}
}
