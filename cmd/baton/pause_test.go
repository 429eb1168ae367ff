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

// Pause is all or nothing: with one of three lock masters down it is
// written to the others (a majority: in effect), the command says which
// master missed it and exits 1; run again once the master is back, it
// repairs the rest.
func TestPausePartialAndRepair(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, fmt.Sprintf("%q", "redis://"+s.Addr()+"/0"))
	}
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
  masters: [%s]
namespace: ptest
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, servers[0].Addr(), strings.Join(urls, ", ")))
	if err := servers[2].Stop(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runIn("pause", "--config", cfg, "a")
	if code != 1 || !strings.Contains(out, "a paused (on 2 of 3 lock masters: in effect") || !strings.Contains(errs, "lock master 2") {
		t.Fatalf("partial pause: %d %q %q", code, out, errs)
	}
	if err := servers[2].Restart(); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runIn("pause", "--config", cfg, "a"); code != 0 || out != "a paused\n" {
		t.Fatalf("pause again: %d %q %q", code, out, errs)
	}
	if n, _ := servers[2].TestClient(t).Exists(context.Background(), "ptest:{a}:paused").Result(); n != 1 {
		t.Fatal("the repaired master has no pause flag")
	}
}
