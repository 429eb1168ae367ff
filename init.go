package baton

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/layout"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/runid"
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

// Errors of the namespace's layout (InitLayout).
var (
	// ErrLayoutMismatch: a config's schedules.shards or worker.lanes is not
	// the layout baton init recorded for its namespace; InitLayout's
	// refusals to change it wrap it too.
	ErrLayoutMismatch = layout.ErrMismatch
	// ErrSchedulesMoving: baton init is moving the runtime schedules to
	// another shard count (or one that did stopped half way): replicas do
	// not start, and puts and deletes are refused, until a move completes.
	ErrSchedulesMoving = layout.ErrMoving
)

// LayoutReport is what InitLayout did.
type LayoutReport struct {
	From, To layout.Layout // the layout recorded before (layout.Default when none was) and now
	Recorded bool          // the record was written (it differed, or there was none, or a move was finished)
	Moved    int           // runtime schedules moved to their new shard
}

// layoutLockTTL is how long baton init's hold of the layout's lock lasts
// without an extension (one per batch of moved schedules).
const layoutLockTTL = time.Minute

// InitLayout records cfg's layout (schedules.shards, worker.lanes) for its
// namespace on the queue Redis, where replicas check it at start, and,
// when the shard count changes, moves the stored runtime schedules into
// their new shards (progress, nil for none, gets the count moved so far).
// A layout that changes needs every replica stopped: it refuses, naming
// them, while the roster shows one live; it refuses a lane count change
// while a lane holds tasks that dedupe ticks (pending, running, retried,
// completed and retained), naming them; one baton init at a time changes
// a namespace's layout (a lock). While it moves, replicas and schedule
// writers refuse (layout.ErrMoving); a move that stopped half way is
// finished by the next InitLayout, to whichever shard count its config
// says. Recording the layout a namespace has already changes nothing.
// `baton init` calls it before it marks the lock masters.
func InitLayout(ctx context.Context, cfg *config.Config, progress func(moved int)) (LayoutReport, error) {
	c, err := NewCluster(cfg)
	if err != nil {
		return LayoutReport{}, err
	}
	defer c.Close()
	rep := LayoutReport{To: layout.Of(cfg)}
	st, err := layout.Read(ctx, c.queue, cfg.Namespace)
	if err != nil {
		return rep, err
	}
	rep.From = st.Layout
	if st.Recorded && st.MovingTo == 0 && st.Layout == rep.To {
		return rep, nil
	}
	if st.Layout != rep.To || st.MovingTo != 0 {
		live, err := c.liveReplicas(ctx)
		if err != nil {
			return rep, err
		}
		if len(live) > 0 {
			return rep, fmt.Errorf("%w: replicas %s of namespace %q run: stop every replica before changing schedules.shards (%d to %d) or worker.lanes (%d to %d)",
				layout.ErrMismatch, strings.Join(live, ", "), cfg.Namespace, rep.From.Shards, rep.To.Shards, rep.From.Lanes, rep.To.Lanes)
		}
	}
	token := runid.New()
	ok, err := layout.Lock(ctx, c.queue, cfg.Namespace, token, layoutLockTTL)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", locking.ErrUnavailable, err)
	}
	if !ok {
		return rep, fmt.Errorf("%w: another baton init is changing namespace %q's layout: wait for it (its lock, %s:init, lapses within %v of it stopping)", layout.ErrMismatch, cfg.Namespace, layout.Key(cfg.Namespace), layoutLockTTL)
	}
	defer func() { _ = layout.Unlock(context.WithoutCancel(ctx), c.queue, cfg.Namespace, token) }()
	// read again under the lock: another init may have changed it
	if st, err = layout.Read(ctx, c.queue, cfg.Namespace); err != nil {
		return rep, err
	}
	rep.From = st.Layout
	if st.Lanes != rep.To.Lanes {
		if err := c.lanesDrained(ctx, st.Lanes, rep.To.Lanes); err != nil {
			return rep, err
		}
	}
	if st.Shards != rep.To.Shards || st.MovingTo != 0 {
		if err := layout.StartMove(ctx, c.queue, cfg.Namespace, st, rep.To.Shards); err != nil {
			return rep, err
		}
		from := []int{st.Shards}
		if st.MovingTo != 0 {
			from = append(from, st.MovingTo)
		}
		rep.Moved, err = schedstore.Move(ctx, c.queue, cfg.Namespace, from, rep.To.Shards, func(moved int) error {
			if progress != nil {
				progress(moved)
			}
			if ok, err := layout.Extend(ctx, c.queue, cfg.Namespace, token, layoutLockTTL); err != nil || !ok {
				return fmt.Errorf("the layout's lock was lost (%v): another baton init may be at work", err)
			}
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("baton: moving the runtime schedules to %d shards stopped after %d: run baton init again to finish (or with the old config, to go back); until then replicas and schedule writers refuse: %w",
				rep.To.Shards, rep.Moved, err)
		}
	}
	if err := layout.Write(ctx, c.queue, cfg.Namespace, rep.To); err != nil {
		return rep, err
	}
	rep.Recorded = true
	return rep, nil
}

// lanesDrained refuses a change of worker.lanes from from to to while a
// lane of the config's queues in the old layout holds a task that dedupes
// a tick: a tick's task found in its old lane would not be found in its
// new one, and could be enqueued again.
func (c *Cluster) lanesDrained(ctx context.Context, from, to int) error {
	old := *c.cfg
	old.Worker.Lanes = from
	var busy []string
	for _, q := range slices.Sorted(maps.Keys(c.cfg.Worker.Queues)) {
		for _, lane := range old.QueueLanes(q) {
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
		return fmt.Errorf("%w: worker.lanes %d to %d moves jobs to other lanes, where their queued and retained tasks no longer dedupe their ticks: %s hold some; let them run and their retention pass (completed tasks are kept for the task's retention)", layout.ErrMismatch, from, to, strings.Join(busy, ", "))
	}
	return nil
}

// queuedTasks counts the tasks asynq queue name holds that dedupe a tick:
// pending, running, scheduled, retrying, and completed ones retained.
func queuedTasks(ctx context.Context, rdb redis.UniversalClient, name string) (int64, error) {
	p := "asynq:{" + name + "}:"
	var cmds []*redis.IntCmd
	_, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		cmds = append(cmds, pipe.LLen(ctx, p+"pending"), pipe.LLen(ctx, p+"active"), pipe.ZCard(ctx, p+"scheduled"),
			pipe.ZCard(ctx, p+"retry"), pipe.ZCard(ctx, p+"completed"))
		return nil
	})
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, err
}
