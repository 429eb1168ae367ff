// Package replicatest runs the replicas of package baton's tests and of
// package batonhttp's: a replica run or served until the test ends, the
// configs both use, and a reader of /metrics.
package replicatest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batonhttp"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// Running builds a replica of cfg and runs it until the test ends (then it
// stops, and its Run must have returned without an error of its own).
func Running(t *testing.T, cfg *config.Config, opts ...baton.Option) *baton.Replica {
	t.Helper()
	r, err := baton.New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("replica %s: %v", r.ID(), err)
		}
	})
	return r
}

// Serving serves r's HTTP handler until the test ends.
func Serving(t *testing.T, r *baton.Replica) *httptest.Server {
	t.Helper()
	h := batonhttp.NewHandler(r)
	web := httptest.NewServer(h)
	t.Cleanup(func() { web.Close(); h.Close() })
	return web
}

// BeatOnBrandNewRedis starts a brand-new redis-server (no marker: its first
// user finds it in its restart quarantine) and loads a config using it as
// queue and lock master under namespace ns, with one exec job "beat" on
// schedule.
func BeatOnBrandNewRedis(t *testing.T, ns, schedule string) (*redistest.Server, *config.Config) {
	t.Helper()
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
namespace: %s
jobs:
  - name: beat
    schedule: %q
    exec: {command: ["true"]}
`, srv.Addr(), ns, schedule))
	if err != nil {
		t.Fatal(err)
	}
	return srv, cfg
}

// OneJobConfig is the config of namespace ns on the Redis at addr with one
// exec job, b, every minute; extra is more top-level YAML ("" for none).
func OneJobConfig(t *testing.T, addr, ns string, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: %s
%s
jobs:
  - name: b
    schedule: "@every 1m"
    concurrency: allow
    exec: {command: ["true"]}
`, addr, ns, extra)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// PendingTasks lists the ids of queue's pending tasks.
func PendingTasks(t *testing.T, rdb *redis.Client, queue string) []string {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(rdb)
	ts, err := insp.ListPendingTasks(queue, asynq.PageSize(1000))
	if err != nil && !strings.Contains(err.Error(), "does not exist") && !strings.Contains(err.Error(), "not found") {
		t.Fatal(err)
	}
	var ids []string
	for _, ti := range ts {
		ids = append(ids, ti.ID)
	}
	return ids
}

// HandlerReplica runs replica id of cfg whose Go handlers (no-ops) are
// named handlers, and waits until c's status shows it live in the roster
// (a put checks that a live replica can run it).
func HandlerReplica(t *testing.T, c *baton.Cluster, cfg *config.Config, id string, handlers ...string) *baton.Replica {
	t.Helper()
	reg := jobs.NewRegistry()
	for _, h := range handlers {
		reg.Register(h, jobs.HandlerFunc(func(context.Context, jobs.Run) error { return nil }))
	}
	r := Running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID(id))
	poll.Require(t, 20*time.Second, "replica "+id+" live in the roster", func() bool {
		st, err := c.Status(context.Background())
		return err == nil && slices.ContainsFunc(st.Replicas, func(r baton.ReplicaStatus) bool { return r.ID == id && r.Live })
	})
	return r
}

// SchedulesConfig is a config on srv with no job of its own.
func SchedulesConfig(t *testing.T, srv *redistest.Server, extra string) *config.Config {
	t.Helper()
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: rt
%s
jobs: []
`, srv.Addr(), extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// OpenCluster opens a Cluster on cfg, closed when the test ends.
func OpenCluster(t *testing.T, cfg *config.Config) *baton.Cluster {
	t.Helper()
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Scrape reads /metrics and returns the value of each series, keyed by its
// name and labels as written.
func Scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^(baton_[^ ]+) ([^ \n]+)$`).FindAllStringSubmatch(string(body), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			out[m[1]] = v
		}
	}
	return out
}
