package baton

import (
	"context"
	"fmt"
	"strings"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/locking"
)

// Init marks the lock masters of cfg (locking.masters, else the queue
// Redis), under its namespace, as a brand-new set, once, before the first
// replica starts: they vote at once instead of waiting out the restart
// quarantine that a master found without a marker otherwise waits (Redis
// cannot tell a brand-new server from one restarted empty). It refuses,
// with an error wrapping locking.ErrMarked that names each one, when any
// master carries a marker (in use, marked before, or reloaded from a
// snapshot) or does not answer, or when a replica of the namespace is live
// in the roster on the queue Redis (a master without a marker under a
// running deployment restarted empty), and marks nothing then; the
// refusal is no failure once the set is marked. `baton init` calls it.
func Init(ctx context.Context, cfg *config.Config) error {
	c, err := NewCluster(cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	members, err := roster.Read(ctx, c.queue, cfg.Namespace)
	if err != nil {
		return fmt.Errorf("%w: cannot tell whether replicas run: %w", locking.ErrUnavailable, err)
	}
	var live []string
	for _, m := range members {
		if m.Live {
			live = append(live, redact.Quote(m.ID))
		}
	}
	if len(live) > 0 {
		return fmt.Errorf("%w: replicas %s of namespace %q run (the roster on the queue Redis): marking is for a set no replica has used yet; a master without a marker under a running deployment restarted empty and waits out its quarantine", locking.ErrMarked, strings.Join(live, ", "), cfg.Namespace)
	}
	return c.locks.InitFresh(ctx)
}
