package baton

import "github.com/redis/go-redis/v9"

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
