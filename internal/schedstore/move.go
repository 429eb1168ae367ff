package schedstore

import (
	"context"
	_ "embed"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
)

var (
	//go:embed lua/move.lua
	moveSrc    string
	moveScript = redis.NewScript(moveSrc)
)

// Move moves namespace ns's stored runtime schedules into a layout of to
// shards from the shards of each count in from (the layout recorded, and
// the target of a move that stopped half way): each record whose shard
// changes is written into its new shard (logged there as a put, with the
// new shard's version) and then deleted from its old one, with its entry
// in the index of failing schedules; the keys of shards the new layout
// does not have are deleted at the end. Every shard of both layouts
// carries a guard while it runs, so puts and deletes refuse (ErrMoving):
// none lands in a shard already read. progress (nil: none) is called with
// the count moved so far after each batch; an error it returns stops the
// move. For baton init, which holds the layout's lock and has recorded the
// move (layout.StartMove). A Move that stops half way leaves every record
// in an old shard or its new one (for one moment, both: the next Move
// keeps the new one) and the guards set, and is run again, to any count.
func Move(ctx context.Context, rdb redis.UniversalClient, ns string, from []int, to int, progress func(moved int) error) (int, error) {
	to = max(to, 1)
	var sources []int
	for _, c := range from {
		if c = max(c, 1); c != to && !slices.Contains(sources, c) {
			sources = append(sources, c) // a layout of to shards is read as it is
		}
	}
	kept := map[string]bool{} // the key prefixes of the new layout's shards
	for k := range to {
		kept[config.ScheduleKeys(ns, k, to)] = true
	}
	guards := map[string]bool{}
	for _, c := range append([]int{to}, sources...) {
		for k := range c {
			guards[newKeys(ns, k, c).moving] = true
		}
	}
	for g := range guards {
		if err := rdb.Set(ctx, g, "1", 0).Err(); err != nil {
			return 0, fmt.Errorf("runtime schedules: guard shard %s: %w", g, err)
		}
	}
	moved := 0
	for _, c := range sources {
		for k := range c {
			n, err := moveShard(ctx, rdb, ns, k, c, to, kept, moved, progress)
			moved += n
			if err != nil {
				return moved, err
			}
		}
	}
	for g := range guards {
		if err := rdb.Del(ctx, g).Err(); err != nil {
			return moved, fmt.Errorf("runtime schedules: lift the guard %s: %w", g, err)
		}
	}
	return moved, nil
}

// moveShard moves the records of shard k of a layout of from shards into
// a layout of to, and deletes the shard's keys when the new layout has no
// such shard.
func moveShard(ctx context.Context, rdb redis.UniversalClient, ns string, k, from, to int, kept map[string]bool, movedBefore int, progress func(int) error) (int, error) {
	old := newKeys(ns, k, from)
	oldPrefix := config.ScheduleKeys(ns, k, from)
	moved := 0
	var cursor uint64
	for {
		kv, next, err := rdb.HScan(ctx, old.defs, cursor, "", 500).Result()
		if err != nil {
			return moved, fmt.Errorf("runtime schedules: read shard %d of %d (%s): %w", k, from, old.defs, err)
		}
		n, err := moveBatch(ctx, rdb, ns, oldPrefix, old, kv, to)
		moved += n
		if err != nil {
			return moved, err
		}
		if progress != nil && n > 0 {
			if err := progress(movedBefore + moved); err != nil {
				return moved, err
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if !kept[oldPrefix] {
		if err := rdb.Del(ctx, old.defs, old.ids, old.log, old.ver, oldPrefix+"failing").Err(); err != nil {
			return moved, fmt.Errorf("runtime schedules: delete the old shard %d's keys: %w", k, err)
		}
	}
	return moved, nil
}

// moveBatch moves the records of kv (HSCAN's id, value pairs of the old
// shard old) whose shard changes.
func moveBatch(ctx context.Context, rdb redis.UniversalClient, ns, oldPrefix string, old keys, kv []string, to int) (int, error) {
	n := 0
	for i := 0; i+1 < len(kv); i += 2 {
		id, raw := kv[i], kv[i+1]
		sh := config.ScheduleShard(id, to)
		if config.ScheduleKeys(ns, sh, to) == oldPrefix {
			continue // its shard stays
		}
		nk := newKeys(ns, sh, to)
		if err := moveScript.Run(ctx, rdb, nk.all(), id, raw, LogLength).Err(); err != nil {
			return n, fmt.Errorf("%s: move to shard %d of %d: %w", describe(id), sh, to, err)
		}
		// its failing entry follows it, then the old copy goes
		newFailing := config.ScheduleKeys(ns, sh, to) + "failing"
		if since, err := rdb.ZScore(ctx, oldPrefix+"failing", id).Result(); err == nil {
			if err := rdb.ZAddNX(ctx, newFailing, redis.Z{Score: since, Member: id}).Err(); err != nil {
				return n, fmt.Errorf("%s: move its failing entry: %w", describe(id), err)
			}
		} else if err != redis.Nil {
			return n, fmt.Errorf("%s: read its failing entry: %w", describe(id), err)
		}
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HDel(ctx, old.defs, id)
			p.ZRem(ctx, old.ids, id)
			p.ZRem(ctx, oldPrefix+"failing", id)
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("%s: delete it from its old shard: %w", describe(id), err)
		}
		n++
	}
	return n, nil
}
