package baton

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/layout"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/schedstore"
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
	live, err := c.liveReplicas(ctx)
	if err != nil {
		return err
	}
	if len(live) > 0 {
		return fmt.Errorf("%w: replicas %s of namespace %q run (the roster on the queue Redis): marking is for a set no replica has used yet; a master without a marker under a running deployment restarted empty and waits out its quarantine", locking.ErrMarked, strings.Join(live, ", "), cfg.Namespace)
	}
	return c.locks.InitFresh(ctx)
}

// liveReplicas names the namespace's live replicas (the roster).
func (c *Cluster) liveReplicas(ctx context.Context) ([]string, error) {
	members, err := roster.Read(ctx, c.queue, c.cfg.Namespace)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot tell whether replicas run: %w", locking.ErrUnavailable, err)
	}
	var live []string
	for _, m := range members {
		if m.Live {
			live = append(live, redact.Quote(m.ID))
		}
	}
	return live, nil
}

// LayoutReport is what InitLayout did.
type LayoutReport struct {
	From, To layout.Layout // the layout recorded before (layout.Default when none was) and now
	Recorded bool          // the record was written (it differed, or there was none)
	Moved    int           // runtime schedules moved to their new shard
}

// InitLayout records cfg's layout (schedules.shards, worker.lanes) for its
// namespace on the queue Redis, where replicas check it at start, and,
// when the shard count changes, moves the stored runtime schedules into
// their new shards (progress, nil for none, gets the count moved so far).
// A layout that changes needs every replica stopped: it refuses, naming
// them, while the roster shows one live, and refuses to drop lanes that
// still hold tasks (they would wait forever), naming them. Recording the
// layout a namespace has already changes nothing. `baton init` calls it
// before it marks the lock masters.
func InitLayout(ctx context.Context, cfg *config.Config, progress func(moved int)) (LayoutReport, error) {
	c, err := NewCluster(cfg)
	if err != nil {
		return LayoutReport{}, err
	}
	defer c.Close()
	rep := LayoutReport{To: layout.Of(cfg)}
	n, err := c.queue.Exists(ctx, layout.Key(cfg.Namespace)).Result()
	if err != nil {
		return rep, fmt.Errorf("%w: %w", locking.ErrUnavailable, err)
	}
	if rep.From, err = layout.Read(ctx, c.queue, cfg.Namespace); err != nil {
		return rep, err
	}
	if n == 1 && rep.From == rep.To {
		return rep, nil
	}
	if rep.From != rep.To {
		live, err := c.liveReplicas(ctx)
		if err != nil {
			return rep, err
		}
		if len(live) > 0 {
			return rep, fmt.Errorf("%w: replicas %s of namespace %q run: stop every replica before changing schedules.shards (%d to %d) or worker.lanes (%d to %d)",
				layout.ErrMismatch, strings.Join(live, ", "), cfg.Namespace, rep.From.Shards, rep.To.Shards, rep.From.Lanes, rep.To.Lanes)
		}
		if err := c.droppedLanesEmpty(ctx, rep.From.Lanes, rep.To.Lanes); err != nil {
			return rep, err
		}
		if rep.From.Shards != rep.To.Shards {
			rep.Moved, err = schedstore.Move(ctx, c.queue, cfg.Namespace, rep.From.Shards, rep.To.Shards, progress)
			if err != nil {
				return rep, fmt.Errorf("moving the runtime schedules to %d shards stopped after %d (run baton init again to go on; the layout stays %d shards until it completes): %w",
					rep.To.Shards, rep.Moved, rep.From.Shards, err)
			}
		}
	}
	if err := layout.Write(ctx, c.queue, cfg.Namespace, rep.To); err != nil {
		return rep, err
	}
	rep.Recorded = true
	return rep, nil
}

// droppedLanesEmpty refuses a change of worker.lanes from from to to
// while a lane the new layout drops holds tasks of any of the config's
// queues.
func (c *Cluster) droppedLanesEmpty(ctx context.Context, from, to int) error {
	if to >= from {
		return nil
	}
	old := *c.cfg
	old.Worker.Lanes = from
	var busy []string
	for _, q := range slices.Sorted(maps.Keys(c.cfg.Worker.Queues)) {
		for _, lane := range old.QueueLanes(q)[to:] {
			n, err := queuedTasks(ctx, c.queue, lane)
			if err != nil {
				return fmt.Errorf("%w: %w", locking.ErrUnavailable, err)
			}
			if n > 0 {
				busy = append(busy, fmt.Sprintf("%s (%d tasks)", lane, n))
			}
		}
	}
	if len(busy) > 0 {
		return fmt.Errorf("%w: worker.lanes %d to %d drops lanes that hold tasks no worker would take: %s; let them drain first", layout.ErrMismatch, from, to, strings.Join(busy, ", "))
	}
	return nil
}

// queuedTasks counts the tasks asynq queue name holds that a worker would
// still run: pending, scheduled, retrying, active.
func queuedTasks(ctx context.Context, rdb redis.UniversalClient, name string) (int64, error) {
	p := "asynq:{" + name + "}:"
	var cmds []*redis.IntCmd
	_, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		cmds = append(cmds, pipe.LLen(ctx, p+"pending"), pipe.LLen(ctx, p+"active"), pipe.ZCard(ctx, p+"scheduled"), pipe.ZCard(ctx, p+"retry"))
		return nil
	})
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, err
}
