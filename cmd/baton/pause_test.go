package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/redistest"
)

func TestPauseResume(t *testing.T) {
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: ptest
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, srv.Addr()))
	rdb := srv.TestClient(t)
	ctx := context.Background()
	if code, out, errs := runIn("pause", "--config", cfg, "a"); code != 0 || out != "a paused\n" {
		t.Fatalf("pause: %d %q %q", code, out, errs)
	}
	if n, _ := rdb.Exists(ctx, "ptest:{a}:paused").Result(); n != 1 {
		t.Fatal("pause flag not set")
	}
	if code, out, errs := runIn("resume", "--config", cfg, "a"); code != 0 || out != "a resumed\n" {
		t.Fatalf("resume: %d %q %q", code, out, errs)
	}
	if n, _ := rdb.Exists(ctx, "ptest:{a}:paused").Result(); n != 0 {
		t.Fatal("pause flag still set")
	}
	if code, _, errs := runIn("pause", "--config", cfg, "nope"); code != 2 || !strings.Contains(errs, `no job "nope"`) {
		t.Fatalf("pause unknown job: %d %q", code, errs)
	}
	if code, _, _ := runIn("pause", "--config", cfg); code != 2 {
		t.Fatalf("pause without a job: %d", code)
	}
	down := writeConfig(t, `redis:
  url: redis://:secret@127.0.0.1:1/0
locking:
  fresh_deployment: true
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	if code, _, errs := runIn("pause", "--config", down, "a"); code != 1 || strings.Contains(errs, "secret") {
		t.Fatalf("pause with Redis down: %d %q", code, errs)
	}
}
