package roster

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/jobs"
)

// Heartbeat is a replica's presence in the roster while its worker runs:
// one Beat at once, then one every BeatEvery, each warning (once) about
// live replicas whose job list differs and about another process under
// this replica's id.
type Heartbeat struct {
	r    *Roster
	stop context.CancelFunc
	done chan struct{}
}

// Start publishes r now and starts its heartbeat on c.
func (r *Roster) Start(c clock.Clock) *Heartbeat {
	ctx, cancel := context.WithCancel(context.Background())
	h := &Heartbeat{r: r, stop: cancel, done: make(chan struct{})}
	beat := func() {
		bctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		members, err := r.Beat(bctx)
		if errors.Is(err, jobs.ErrCorrupt) {
			r.log.Warn("roster entries unreadable (left out; delete or correct them)", slog.Any("error", err))
		} else if err != nil {
			if ctx.Err() == nil {
				r.log.Debug("roster heartbeat failed", slog.Any("error", err))
			}
			return
		}
		r.WarnDiffering(members)
		r.WarnDuplicate(members)
	}
	beat()
	go func() {
		defer close(h.done)
		clock.Every(ctx.Done(), c, BeatEvery, beat)
	}()
	return h
}

// Stop stops the heartbeat; leave also removes the replica from the roster
// at once (a graceful stop).
func (h *Heartbeat) Stop(leave bool) {
	h.stop()
	<-h.done
	if leave {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = h.r.Leave(ctx)
	}
}
