package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

func TestStatusShowsSingletonHolder(t *testing.T) {
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: stest
jobs:
  - name: pump
    mode: singleton
    lock_ttl: 5s
    exec: {command: ["true"]}
  - name: tick
    schedule: "@every 1m"
    paused: true
    exec: {command: ["true"]}
`, srv.Addr()))
	code, out, errs := runIn("status", "--config", cfg)
	if code != 0 || !strings.Contains(out, "pump") || !strings.Contains(out, "yes (config)") {
		t.Fatalf("status without a holder: %d %q %q", code, out, errs)
	}
	rdb := srv.TestClient(t)
	locks, err := locking.New([]redis.UniversalClient{rdb}, locking.WithFreshDeployment(), locking.WithPrefix("stest:lock:"))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	e, err := locks.Election("singleton:pump", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := e.Campaign(ctx, "replica-7")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)
	code, out, errs = runIn("status", "--config", cfg)
	if code != 0 || !strings.Contains(out, "replica-7") || !strings.Contains(out, fmt.Sprint(term.Fence())) {
		t.Fatalf("status with a holder: %d %q %q", code, out, errs)
	}
	if !strings.Contains(out, "REPLICAS: none seen") {
		t.Errorf("status without replicas:\n%s", out)
	}
	// a task left in a queue nobody consumes is pointed out
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask("baton:run", nil, asynq.Queue("stest:orphan"))); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runIn("status", "--config", cfg)
	if code != 0 || !strings.Contains(out, `queue "stest:orphan" holds 1 pending`) {
		t.Errorf("status with an orphaned queue: %d\n%s%s", code, out, errs)
	}
}
