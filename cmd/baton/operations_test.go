package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// Adversarial review of the operating commands.

// A worker runs a forbid job (lock_ttl 2s) and is SIGKILLed mid-run (its
// child dies with it). The history keeps "started" with no end, but once
// the execution lease has expired `baton status` no longer lists the run
// as running.
func TestStatusForgetsADeadWorkersRun(t *testing.T) {
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: rvdie
worker: {shutdown_grace: 1s}
jobs:
  - name: slow
    schedule: "@yearly"
    lock_ttl: 2s
    max_retry: 0
    exec: {command: ["sleep", "30"]}
`, srv.Addr()))
	p := start(t, nil, "worker", "--config", cfg, "--http", "")
	if code, _, errs := runIn("trigger", "--config", cfg, "slow"); code != 0 {
		t.Fatal(errs)
	}
	status := func() baton.Status {
		var st baton.Status
		code, out, errs := runIn("status", "--config", cfg, "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status: %d %v %s", code, err, errs)
		}
		return st
	}
	poll.Require(t, 15*time.Second, "the run under way with its lock", func() bool {
		st := status()
		return len(st.Jobs[0].Running) == 1 && st.Jobs[0].Lock != nil
	})
	_ = p.cmd.Process.Kill()
	p.wait(t, 10*time.Second)
	poll.Require(t, 10*time.Second, "the execution lease gone", func() bool { return status().Jobs[0].Lock == nil })
	time.Sleep(time.Second)
	st := status()
	if r := st.Jobs[0].Running; len(r) > 0 {
		t.Errorf("status lists %d run(s) as running (worker %s, started %s) although its worker is dead and the job's execution lease is gone; history: %q",
			len(r), r[0].Worker, r[0].Started.Format(time.RFC3339), strings.TrimSpace(func() string { _, out, _ := runIn("history", "--config", cfg, "slow"); return out }()))
	}
}
