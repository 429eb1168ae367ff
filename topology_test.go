package baton_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// Redis Cluster as the one Redis (queue, tick claims, single-master locks,
// history): two replicas on a six-process cluster (three primaries, each
// with a replica) run every tick of a queued and a local job once; the
// history and status read it back.
func TestReplicasOnARedisCluster(t *testing.T) {
	t.Parallel()
	addrs := redistest.NewCluster(t)
	addReplicas(t, addrs)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {cluster: {addrs: [%q, %q, %q]}}
locking: {fresh_deployment: true}
namespace: topo
worker: {shutdown_grace: 2s}
jobs:
  - name: queued
    schedule: "@every 1s"
    handler: {name: count}
  - name: inproc
    schedule: "@every 1s"
    mode: local
    handler: {name: count}
`, addrs[0], addrs[1], addrs[2])))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]int{}
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("count", func(_ context.Context, run jobs.Run) error {
		mu.Lock()
		runs[run.Job+"@"+run.Tick.Format(time.RFC3339)]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, id := range []string{"cl-1", "cl-2"} {
		r, err := baton.New(cfg, baton.WithHandlers(reg), baton.WithReplicaID(id))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := r.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("replica %s: %v", id, err)
			}
		})
	}
	ticks := func(job string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for k := range runs {
			if len(k) > len(job) && k[:len(job)+1] == job+"@" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(25 * time.Second)
	for (ticks("queued") < 5 || ticks("inproc") < 5) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // real time: ticks come every second
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hist, herr := c.History(context.Background(), "queued", 10)
	st, serr := c.Status(context.Background())
	stop()
	wg.Wait()
	if ticks("queued") < 5 || ticks("inproc") < 5 {
		t.Fatalf("in 25s on the cluster: %d queued and %d local ticks ran, want 5 each", ticks("queued"), ticks("inproc"))
	}
	mu.Lock()
	for k, n := range runs {
		if n != 1 {
			t.Errorf("%s ran %d times", k, n)
		}
	}
	mu.Unlock()
	if herr != nil || len(hist) == 0 {
		t.Errorf("history on the cluster: %d records, %v", len(hist), herr)
	}
	if serr != nil || st == nil || len(st.Jobs) != 2 || st.Jobs[0].Last == nil || len(st.Replicas) < 2 {
		t.Errorf("status on the cluster: %+v, %v", st, serr)
	}
}

// addReplicas starts one replica per primary of the cluster at addrs and
// waits until each is attached.
func addReplicas(t *testing.T, addrs []string) {
	t.Helper()
	ctx := context.Background()
	host, port, _ := strings.Cut(addrs[0], ":")
	for _, primary := range addrs {
		pc := redis.NewClient(&redis.Options{Addr: primary})
		id, err := pc.ClusterMyID(ctx).Result()
		pc.Close()
		if err != nil {
			t.Fatal(err)
		}
		node := redistest.New(t, redistest.WithArgs("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000"))
		c := node.TestClient(t)
		if err := c.ClusterMeet(ctx, host, port).Err(); err != nil {
			t.Fatal(err)
		}
		poll.Require(t, 10*time.Second, "the new node to learn the primary "+id, func() bool {
			return c.Do(ctx, "CLUSTER", "REPLICATE", id).Err() == nil
		})
	}
	pc := redis.NewClient(&redis.Options{Addr: addrs[0]})
	defer pc.Close()
	poll.Require(t, 20*time.Second, "six nodes, three of them replicas", func() bool {
		nodes, err := pc.ClusterNodes(ctx).Result()
		return err == nil && strings.Count(nodes, "slave") == 3
	})
}
