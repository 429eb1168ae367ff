package locking

import (
	"context"
	"fmt"
	"time"
)

// Forget lets the masters drop what the locks names keep once released: their
// fencing counters, which on a quorum live a day after their last fence, so
// that a steady churn of names used once (a lock per deleted job, per
// finished order) does not fill the masters for a day. Call it for names
// that will not be taken again soon. A counter is not deleted at once: its
// life is shortened to the restart quarantine (unless it ends sooner), after
// which a name taken again draws its fences from the masters' clock in µs,
// above every fence issued before, as after a counter's normal expiry; a
// name taken again meanwhile counts on from its counter. A lock still held
// keeps its lease. Each master is bounded by the master timeout (one second
// when none is set) and ctx; the errors of the masters that failed are
// joined (their counters live on until their own expiry).
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
