package baton

import (
	"time"

	"github.com/redis/go-redis/v9"
)

// PauseValue exposes pauseValue to the package's tests.
var PauseValue = pauseValue

// HookCluster adds h to c's Redis clients: the queue Redis and each lock
// master (once when they are one).
func HookCluster(c *Cluster, h redis.Hook) {
	c.queue.AddHook(h)
	for _, m := range c.masters {
		if m != c.queue {
			m.AddHook(h)
		}
	}
}

// SetUnservedHTTPGrace sets how long a replica waits for a handler to serve
// http.listen before it warns, until the test ends.
func SetUnservedHTTPGrace(t interface{ Cleanup(func()) }, d time.Duration) {
	old := unservedHTTPGrace
	unservedHTTPGrace = d
	t.Cleanup(func() { unservedHTTPGrace = old })
}
