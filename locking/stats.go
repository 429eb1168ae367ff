package locking

import (
	"sync/atomic"
	"time"
)

// Stats counts what a Client's locks did since it was made, for metrics.
type Stats struct {
	// Acquired counts leases granted (TryLock, Lock, Hold, elections).
	Acquired uint64
	// Extended counts extensions confirmed by a quorum (auto-extension and
	// Extend).
	Extended uint64
	// ExtendFailed counts extensions that a quorum did not confirm (a
	// retry may still save the lease; Lost counts those it did not).
	ExtendFailed uint64
	// Lost counts leases that ended because the lock was lost (ErrLost).
	Lost uint64
	// Waited is the time Lock calls that got their lease spent waiting.
	Waited time.Duration
}

// counters are a Client's Stats as it counts them.
type counters struct {
	acquired, extended, extendFailed, lost atomic.Uint64
	waited                                 atomic.Int64 // ns
}

// Stats returns what the client's locks did since it was made.
func (c *Client) Stats() Stats {
	return Stats{
		Acquired:     c.stats.acquired.Load(),
		Extended:     c.stats.extended.Load(),
		ExtendFailed: c.stats.extendFailed.Load(),
		Lost:         c.stats.lost.Load(),
		Waited:       time.Duration(c.stats.waited.Load()),
	}
}
