package locking

import (
	"context"
	"fmt"
	"time"
)

// Forget deletes what the mutexes names (as given to Lock) keep on the
// masters once released, their fencing counters, for names that are gone
// for good (a lock per deleted job, per finished order): on a quorum a
// counter lives a day after its last fence, and a steady churn of names
// used once would fill the masters for a day. Fences stay strictly
// increasing: on a quorum each master keeps one floor above every counter
// it deleted, which a counter seeded again starts above, whatever the
// masters' clocks; on one master a counter starts again from its clock in
// µs, as after its expiry. A lease still held keeps its lock; an
// acquisition that lands on a master after the forget seeds its counter
// again. Each master is bounded by the master timeout (one second when
// none is set) and ctx; the errors of the masters that failed are joined
// (their counters live on until their own expiry).
func (c *Client) Forget(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	counters := make([]string, len(names))
	for i, n := range names {
		if n == "" {
			return fmt.Errorf("locking: forget: empty lock name (at %d): %w", i, ErrInvalid)
		}
		counters[i] = fenceKey(c.opts.prefix, n)
	}
	timeout := c.opts.masterTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	if err := c.g.Forget(ctx, timeout, nil, counters); err != nil {
		return fmt.Errorf("locking: forget %d locks: %w", len(names), err)
	}
	return nil
}
