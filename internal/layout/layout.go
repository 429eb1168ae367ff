// Package layout keeps a namespace's layout in Redis: how many shards its
// runtime schedules are split into (schedules.shards) and how many lanes
// each queue is spread over (worker.lanes). Every replica and tool of a
// namespace must use the same layout, or a schedule put into one shard is
// looked for in another and a tick's task lands in a lane where its task ID
// no longer dedupes it. `baton init` records the config's layout (and
// moves the stored schedules when the shard count changes); a replica or
// tool whose config says otherwise refuses to start.
package layout

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
)

// ErrMismatch: the config's layout is not the one recorded in Redis.
var ErrMismatch = errors.New("the config's layout is not the namespace's")

// Layout is a namespace's layout.
type Layout struct {
	Shards int // schedules.shards
	Lanes  int // worker.lanes
}

// Default is the layout of a namespace no `baton init` recorded one for:
// one shard, one lane (the layout of every release before layouts).
var Default = Layout{Shards: 1, Lanes: 1}

// Of returns cfg's layout.
func Of(cfg *config.Config) Layout {
	return Layout{Shards: cfg.Schedules.Shards, Lanes: cfg.Worker.Lanes}
}

// Read returns the layout recorded for namespace ns, Default when none is.
// A record that is not a layout is an error naming the key.
func Read(ctx context.Context, rdb redis.UniversalClient, ns string) (Layout, error) {
	m, err := rdb.HGetAll(ctx, Key(ns)).Result()
	if err != nil {
		return Layout{}, fmt.Errorf("read the namespace's layout (%s): %w", Key(ns), err)
	}
	if len(m) == 0 {
		return Default, nil
	}
	var l Layout
	for field, dst := range map[string]*int{"shards": &l.Shards, "lanes": &l.Lanes} {
		n, err := strconv.Atoi(m[field])
		if err != nil || n < 1 || n > config.MaxShards {
			return Layout{}, fmt.Errorf("the namespace's layout in %s: field %q is %q, not a number from 1 to %d: run baton init to record the config's", Key(ns), field, m[field], config.MaxShards)
		}
		*dst = n
	}
	return l, nil
}

// Check returns an error wrapping ErrMismatch, naming both, when cfg's
// layout is not the one recorded for its namespace.
func Check(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config) error {
	have, err := Read(ctx, rdb, cfg.Namespace)
	if err != nil {
		return err
	}
	return compare(cfg, have)
}

func compare(cfg *config.Config, have Layout) error {
	want := Of(cfg)
	if want == have {
		return nil
	}
	return fmt.Errorf("%w: the config says schedules.shards %d and worker.lanes %d, namespace %q is laid out with %d and %d (%s): every replica must use the same; run baton init with the new config to move to it, with every replica stopped (docs/operating.md, \"Moving to a Redis Cluster\")",
		ErrMismatch, want.Shards, want.Lanes, cfg.Namespace, have.Shards, have.Lanes, Key(cfg.Namespace))
}

// Write records l for namespace ns.
func Write(ctx context.Context, rdb redis.UniversalClient, ns string, l Layout) error {
	if err := rdb.HSet(ctx, Key(ns), "shards", l.Shards, "lanes", l.Lanes).Err(); err != nil {
		return fmt.Errorf("record the namespace's layout (%s): %w", Key(ns), err)
	}
	return nil
}
