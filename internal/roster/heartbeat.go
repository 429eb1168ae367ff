package roster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/jobs"
)

// Heartbeat is a replica's presence in the roster while its worker runs:
// one Beat at Start, then one every BeatEvery, each warning (once) about
// live replicas whose job list differs and about another process under
// this replica's id. It is a lifecycle.Service: Stop ends the beats and
// removes the replica from the roster at once.
type Heartbeat struct {
	r *Roster
	c clock.Clock

	mu   sync.Mutex
	stop context.CancelFunc // nil unless started and not stopped
	done chan struct{}
}

// Heartbeat returns r's heartbeat on c, not started.
func (r *Roster) Heartbeat(c clock.Clock) *Heartbeat { return &Heartbeat{r: r, c: c} }

// Start publishes the replica now and beats in the background until Stop.
// A failed first beat is logged, not returned: the next beat tries again.
func (h *Heartbeat) Start(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stop != nil {
		return errors.New("roster: heartbeat already started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop, h.done = cancel, make(chan struct{})
	h.beat(ctx)
	go func() {
		defer close(h.done)
		clock.Every(ctx.Done(), h.c, BeatEvery, func() { h.beat(ctx) })
	}()
	return nil
}

// beat publishes the replica once and warns about what the roster says.
func (h *Heartbeat) beat(ctx context.Context) {
	r := h.r
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

// Stop ends the beats and removes the replica from the roster at once,
// waiting a second at most (within ctx): replicas read the roster
// without it from then on, not only once its entry expires. A heartbeat
// not started, or stopped, is left as it is.
func (h *Heartbeat) Stop(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stop == nil {
		return nil
	}
	h.stop()
	<-h.done
	h.stop = nil
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := h.r.Leave(lctx); err != nil {
		return fmt.Errorf("roster: leave: %w", err)
	}
	return nil
}
