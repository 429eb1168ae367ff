package baton

import (
	"context"

	"github.com/batonhq/baton/config"
)

// Init marks the lock masters of cfg (locking.masters, else the queue
// Redis), under its namespace, as a brand-new set, once, before the first
// replica starts: they vote at once instead of waiting out the restart
// quarantine that a master found without a marker otherwise waits (Redis
// cannot tell a brand-new server from one restarted empty). It refuses,
// with an error wrapping locking.ErrMarked that names each one, when any
// master carries a marker (in use, marked before, or reloaded from a
// snapshot) or does not answer, and marks nothing then: running it again
// is harmless. `baton init` calls it.
func Init(ctx context.Context, cfg *config.Config) error {
	c, err := NewCluster(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.locks.InitFresh(ctx)
}
