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
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
)

// ErrMismatch: the config's layout is not the one recorded in Redis. The
// root package exports it (baton.ErrLayoutMismatch), and its text begins
// with that package's name.
var ErrMismatch = errors.New("baton: the config's layout is not the namespace's")

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

// ErrMoving: baton init is moving the runtime schedules to another shard
// count, or one that did stopped half way: nothing may read or write them
// until a baton init completes a move. The root package exports it
// (baton.ErrSchedulesMoving), and its text begins with that package's name.
var ErrMoving = errors.New("baton: the runtime schedules are being moved to another layout")

// State is what the record says: the layout, and while baton init moves
// the runtime schedules to another shard count (or after one that stopped
// half way), that count.
type State struct {
	Layout
	MovingTo int  // 0: no move
	Recorded bool // false: no record (the layout is Default)
}

// Read returns the state recorded for namespace ns, Default when none is.
// A record that is not a layout is an error naming the key.
func Read(ctx context.Context, rdb redis.UniversalClient, ns string) (State, error) {
	m, err := rdb.HGetAll(ctx, Key(ns)).Result()
	if err != nil {
		return State{}, fmt.Errorf("read the namespace's layout (%s): %w", Key(ns), err)
	}
	if len(m) == 0 {
		return State{Layout: Default}, nil
	}
	st := State{Recorded: true}
	for field, dst := range map[string]*int{"shards": &st.Shards, "lanes": &st.Lanes} {
		n, err := strconv.Atoi(m[field])
		if err != nil || n < 1 || n > config.MaxShards {
			return State{}, fmt.Errorf("the namespace's layout in %s: field %q is %q, not a number from 1 to %d: run baton init to record the config's", Key(ns), field, m[field], config.MaxShards)
		}
		*dst = n
	}
	if v, ok := m["moving_to"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > config.MaxShards {
			return State{}, fmt.Errorf("the namespace's layout in %s: field \"moving_to\" is %q, not a number from 1 to %d: run baton init to finish the move", Key(ns), v, config.MaxShards)
		}
		st.MovingTo = n
	}
	return st, nil
}

// Check returns an error wrapping ErrMismatch, naming both, when cfg's
// layout is not the one recorded for its namespace, and one wrapping
// ErrMoving while the schedules are being moved.
func Check(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config) error {
	st, err := Read(ctx, rdb, cfg.Namespace)
	if err != nil {
		return err
	}
	if st.MovingTo != 0 {
		return fmt.Errorf("%w: namespace %q's runtime schedules are being moved from %d to %d shards by baton init, or one that stopped half way (%s): run baton init with a config of %d shards to finish (or of %d, to go back), with every replica stopped",
			ErrMoving, cfg.Namespace, st.Shards, st.MovingTo, Key(cfg.Namespace), st.MovingTo, st.Shards)
	}
	return compare(cfg, st.Layout)
}

func compare(cfg *config.Config, have Layout) error {
	want := Of(cfg)
	if want == have {
		return nil
	}
	return fmt.Errorf("%w: the config says schedules.shards %d and worker.lanes %d, namespace %q is laid out with %d and %d (%s): every replica must use the same; run baton init with the new config to move to it, with every replica stopped (docs/operating.md, \"Moving to a Redis Cluster\")",
		ErrMismatch, want.Shards, want.Lanes, cfg.Namespace, have.Shards, have.Lanes, Key(cfg.Namespace))
}

// Write records l for namespace ns, ending a move.
func Write(ctx context.Context, rdb redis.UniversalClient, ns string, l Layout) error {
	_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, Key(ns), "shards", l.Shards, "lanes", l.Lanes)
		p.HDel(ctx, Key(ns), "moving_to")
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the namespace's layout (%s): %w", Key(ns), err)
	}
	return nil
}

// StartMove records that the runtime schedules of namespace ns, laid out
// as st, are being moved to to shards: every replica and writer refuses
// them until Write records the layout the move ends in.
func StartMove(ctx context.Context, rdb redis.UniversalClient, ns string, st State, to int) error {
	if err := rdb.HSet(ctx, Key(ns), "shards", st.Shards, "lanes", st.Lanes, "moving_to", to).Err(); err != nil {
		return fmt.Errorf("record the move of the namespace's schedules (%s): %w", Key(ns), err)
	}
	return nil
}

// Lock takes the lock that lets one baton init change namespace ns's
// layout at a time, for ttl; it returns false when another holds it. The
// holder extends it (Extend) while it works and Unlocks it.
func Lock(ctx context.Context, rdb redis.UniversalClient, ns, token string, ttl time.Duration) (bool, error) {
	ok, err := rdb.SetNX(ctx, lockKey(ns), token, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("take the layout's lock (%s): %w", lockKey(ns), err)
	}
	return ok, nil
}

var (
	extendScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0`)
	unlockScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// Extend keeps the lock of token for ttl more; false when it was lost.
func Extend(ctx context.Context, rdb redis.UniversalClient, ns, token string, ttl time.Duration) (bool, error) {
	n, err := extendScript.Run(ctx, rdb, []string{lockKey(ns)}, token, ttl.Milliseconds()).Int()
	return n == 1, err
}

// Unlock frees the lock of token.
func Unlock(ctx context.Context, rdb redis.UniversalClient, ns, token string) error {
	return unlockScript.Run(ctx, rdb, []string{lockKey(ns)}, token).Err()
}
