package baton_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/replicatest"
)

// The helpers the package's tests share with batonhttp's.
var (
	running             = replicatest.Running
	serving             = replicatest.Serving
	scrape              = replicatest.Scrape
	beatOnBrandNewRedis = replicatest.BeatOnBrandNewRedis
	oneJobConfig        = replicatest.OneJobConfig
	pendingTasks        = replicatest.PendingTasks
	handlerReplica      = replicatest.HandlerReplica
	schedulesConfig     = replicatest.SchedulesConfig
	openCluster         = replicatest.OpenCluster
)

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
