package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hibiken/asynq"

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
}

var _ scheduler.Dispatcher = (*Dispatcher)(nil)

// NewDispatcher returns a Dispatcher for cfg's jobs. client enqueues cron-mode
// runs; local starts local-mode runs (nil: local ticks fail to dispatch); log
// may be nil (no logging). The client stays owned by the caller.
func NewDispatcher(cfg *Config, client *asynq.Client, local LocalRunner, log *slog.Logger) *Dispatcher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{cfg: cfg, client: client, local: local, log: log}
}

// Dispatch hands tick t off, once per tick ID:
//
//   - mode cron: enqueues the task NewRunTask builds (task ID t.ID()). If asynq
//     answers ErrTaskIDConflict the tick is already enqueued (or retained after
//     its run) and Dispatch returns nil: exactly once holds.
//   - mode local: calls RunLocal, which starts the run in-process.
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
		if err := d.local.RunLocal(ctx, job, t); err != nil {
			return fmt.Errorf("jobs: dispatch %s: %w", t.ID(), err)
		}
		return nil
	default:
		return fmt.Errorf("jobs: dispatch %s: mode %s is not dispatched by ticks", t.ID(), job.Mode)
	}
}

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
