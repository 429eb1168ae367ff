package schedstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
)

var (
	//go:embed lua/move.lua
	moveSrc    string
	moveScript = redis.NewScript(moveSrc)
)

// Move moves namespace ns's stored runtime schedules from a layout of from
// shards to one of to shards: each record whose shard changes is written
// into its new shard (logged there as a put, with the new shard's version)
// and then deleted from its old one, with its entry in the index of
// failing schedules; the keys of shards the new layout no longer has are
// deleted at the end. progress (nil: none) is called with the count moved
// so far after each batch. For `baton init`, with every replica stopped:
// a replica following the old layout would not see the moves. A Move that
// stops half way leaves every record in its old shard or its new one (or,
// for one moment, both: the next Move keeps the new one) and is run again.
func Move(ctx context.Context, rdb redis.UniversalClient, ns string, from, to int, progress func(moved int)) (int, error) {
	from, to = max(from, 1), max(to, 1)
	moved := 0
	kept := map[string]bool{} // the key prefixes of the new layout's shards
	for k := range to {
		kept[config.ScheduleKeys(ns, k, to)] = true
	}
	for k := range from {
		old := newKeys(ns, k, from)
		oldPrefix := config.ScheduleKeys(ns, k, from)
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
				progress(moved)
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
			return n, fmt.Errorf("runtime schedule %q: move to shard %d of %d: %w", id, sh, to, err)
		}
		// its failing entry follows it, then the old copy goes
		newFailing := config.ScheduleKeys(ns, sh, to) + "failing"
		if since, err := rdb.ZScore(ctx, oldPrefix+"failing", id).Result(); err == nil {
			if err := rdb.ZAddNX(ctx, newFailing, redis.Z{Score: since, Member: id}).Err(); err != nil {
				return n, fmt.Errorf("runtime schedule %q: move its failing entry: %w", id, err)
			}
		} else if err != redis.Nil {
			return n, fmt.Errorf("runtime schedule %q: read its failing entry: %w", id, err)
		}
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HDel(ctx, old.defs, id)
			p.ZRem(ctx, old.ids, id)
			p.ZRem(ctx, oldPrefix+"failing", id)
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("runtime schedule %q: delete it from its old shard: %w", id, err)
		}
		n++
	}
	return n, nil
}
