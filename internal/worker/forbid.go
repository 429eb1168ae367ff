package worker

import (
	"context"
	"log/slog"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/scheduler"
)

// forbidPolicy is concurrency forbid (the default): a tick that finds the
// job running is skipped. The execution lease keeps runs apart (G2).
type forbidPolicy struct{ e *engine }

// acquire takes the job's lease, or skips the tick when another run holds
// it (unless that run is an earlier attempt of the same tick: see
// meetSameTick).
func (p forbidPolicy) acquire(ctx context.Context, job *config.Job, t scheduler.Tick, attempt int, retries bool, log *slog.Logger) (*grant, error) {
	g, b, done, err := p.e.takeOrMeet(ctx, job, t, attempt, retries, log)
	if done {
		return g, err
	}
	p.e.skipBusy(ctx, job, t, attempt, b, log)
	return nil, nil
}

// release releases the lease.
func (p forbidPolicy) release(ctx context.Context, job *config.Job, _ scheduler.Tick, g *grant, log *slog.Logger) {
	ctx, cancel := releaseContext(ctx, job)
	defer cancel()
	releaseLease(ctx, g.lease, log)
}
