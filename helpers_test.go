package baton_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
)

// running builds a replica of cfg and runs it until the test ends (then it
// stops, and its Run must have returned without an error of its own).
func running(t *testing.T, cfg *config.Config, opts ...baton.Option) *baton.Replica {
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

// serving serves r's HTTP handler until the test ends.
func serving(t *testing.T, r *baton.Replica) *httptest.Server {
	t.Helper()
	h := baton.NewHTTPHandler(r)
	web := httptest.NewServer(h)
	t.Cleanup(func() { web.Close(); h.Close() })
	return web
}

// beatOnBrandNewRedis starts a brand-new redis-server (no marker: its first
// user finds it in its restart quarantine) and loads a config using it as
// queue and lock master under namespace ns, with one exec job "beat" on
// schedule.
func beatOnBrandNewRedis(t *testing.T, ns, schedule string) (*redistest.Server, *config.Config) {
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

// historyStream appends events to a job's history with the worker's own
// script (internal/runlog/lua/history_add.lua) and field layout, so trimming behaves as
// in production.
type historyStream struct {
	rdb    *redis.Client
	key    string
	keep   int   // history.runs * 3
	maxAge int64 // ms
	script *redis.Script
}

func newHistoryStream(t *testing.T, rdb *redis.Client, ns, job string, runs int) *historyStream {
	t.Helper()
	src, err := os.ReadFile("internal/runlog/lua/history_add.lua")
	if err != nil {
		t.Fatal(err)
	}
	return &historyStream{rdb: rdb, key: ns + ":{history:" + job + "}", keep: runs * 3,
		maxAge: (7 * 24 * time.Hour).Milliseconds(), script: redis.NewScript(string(src))}
}

func (h *historyStream) add(t *testing.T, fields ...any) {
	t.Helper()
	args := append([]any{h.keep, h.maxAge}, fields...)
	if err := h.script.Run(context.Background(), h.rdb, []string{h.key}, args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// ran writes what a worker writes for one successful run of tick at.
func (h *historyStream) ran(t *testing.T, at time.Time, run string) {
	tick := at.UTC().Format(time.RFC3339Nano)
	h.add(t, "ev", "started", "tick", tick, "run", run, "replica", "w1", "attempt", 1, "fence", 7, "by", "s1")
	h.add(t, "ev", "finished", "tick", tick, "run", run, "replica", "w1", "attempt", 1, "status", "ok", "fence", 7, "exit_code", 0)
}

// paused writes what the scheduler writes for a paused tick.
func (h *historyStream) paused(t *testing.T, at time.Time) {
	h.add(t, "ev", "not_run", "tick", at.UTC().Format(time.RFC3339Nano), "run", "", "status", "paused", "reason", "the job is paused")
}

func oneJobConfig(t *testing.T, addr, ns string, extra string) *config.Config {
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

func pendingTasks(t *testing.T, rdb *redis.Client, queue string) []string {
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

// handlerJobConfig is the config of namespace ns on the Redis at addr with
// one job, name, that runs Go handler handler on schedule; extra is more
// top-level YAML ("" for none).
func handlerJobConfig(t *testing.T, addr, ns, extra, name, schedule, handler string) *config.Config {
	t.Helper()
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: %s
%s
jobs:
  - name: %s
    schedule: %q
    handler: {name: %s}
`, addr, ns, extra, name, schedule, handler))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
