package schedstore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// With schedules.shards, every schedule lands in its shard's keys (a
// slot each), and the store and a follower see them all as one: puts and
// deletes followed by every shard's stream, List in id order across the
// shards page by page, Count the sum.
func TestShardedStoreActsAsOne(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "schedules: {shards: 4}\n")
	ctx := context.Background()
	st, f, a := following(t, rdb, cfg)
	var ids []string
	for i := range 40 {
		id := fmt.Sprintf("tenant-%02d", i)
		ids = append(ids, id)
		r := put(t, st, id, `{schedule: "@hourly", handler: {name: h}}`)
		if got := r.Version; got < 1 {
			t.Fatalf("version %d", got)
		}
	}
	used := map[int]bool{}
	for _, id := range ids {
		k := config.ScheduleShard(id, 4)
		used[k] = true
		if n, _ := rdb.HExists(ctx, fmt.Sprintf("fs:{schedules.%d}:defs", k), id).Result(); !n {
			t.Fatalf("%s not in shard %d's hash", id, k)
		}
	}
	if len(used) != 4 {
		t.Fatalf("40 ids used shards %v", used)
	}
	if n, _ := rdb.Exists(ctx, "fs:{schedules}:defs").Result(); n != 0 {
		t.Fatal("the one-shard hash was written")
	}
	poll.Require(t, 10*time.Second, "the follower to hold all 40", func() bool { return len(a.names()) == 40 })
	for _, id := range ids {
		r, err := st.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if f.Version(id) < r.Change {
			t.Fatalf("%s: follower at %d of its shard, the put was %d", id, f.Version(id), r.Change)
		}
	}
	var listed []string
	after := ""
	for {
		recs, bad, next, err := st.List(ctx, "tenant-", after, 7)
		if err != nil || len(bad) > 0 {
			t.Fatal(err, bad)
		}
		for _, r := range recs {
			listed = append(listed, r.ID)
		}
		if next == "" {
			break
		}
		after = next
	}
	if !slices.Equal(listed, ids) {
		t.Fatalf("listed %v", listed)
	}
	if n, err := st.Count(ctx); err != nil || n != 40 {
		t.Fatalf("count %d, %v", n, err)
	}
	for _, id := range ids[:10] {
		if ok, err := st.Delete(ctx, id); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	poll.Require(t, 10*time.Second, "the deletes followed", func() bool { return len(a.names()) == 30 })
}

// A shard that lost its changes (its keys flushed, as a Cluster primary
// restarted empty) is found and restored on its own: its schedules are put
// back, the other shards' are left as they are.
func TestShardThatLostItsChangesIsRestoredAlone(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "schedules: {shards: 3}\n")
	ctx := context.Background()
	st, f, a := following(t, rdb, cfg)
	lost := 0
	for i := range 30 {
		id := fmt.Sprintf("s%02d", i)
		put(t, st, id, `{schedule: "@hourly", handler: {name: h}}`)
		if config.ScheduleShard(id, 3) == 1 {
			lost++
		}
	}
	poll.Require(t, 10*time.Second, "all 30 followed", func() bool { return len(a.names()) == 30 })
	vers := make([]string, 3)
	for k := range vers {
		vers[k], _ = rdb.Get(ctx, config.ScheduleKeys("fs", k, 3)+"ver").Result()
	}
	p := config.ScheduleKeys("fs", 1, 3)
	if err := rdb.Del(ctx, p+"defs", p+"ids", p+"log", p+"ver").Err(); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 10*time.Second, "shard 1's schedules put back", func() bool {
		n, _ := rdb.HLen(ctx, p+"defs").Result()
		return n == int64(lost)
	})
	if len(a.names()) != 30 || f.WentBackCount() != 1 {
		t.Fatalf("the copy holds %d, went back %d times", len(a.names()), f.WentBackCount())
	}
	for _, k := range []int{0, 2} {
		if v, _ := rdb.Get(ctx, config.ScheduleKeys("fs", k, 3)+"ver").Result(); v != vers[k] {
			t.Errorf("shard %d changed: version %s, was %s", k, v, vers[k])
		}
	}
}
