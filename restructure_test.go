package baton_test

// Review of the restructuring (7b41a71..HEAD): the composition root that
// replaced cmd/baton's replica wiring. Self-contained: redistest only.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// G7, "nothing half-starts": a replica whose Start fails after its worker
// started (here the singleton jobs cannot start: a valid config whose
// locking.lateness makes a 1s lock_ttl too short for the lock client) and
// that is then Closed, as Close's doc says to do with a replica that will
// not run, must leave no worker behind: no heartbeat in the roster, no
// asynq server fetching tasks. Replica.Start sets started only at its end,
// and Close shuts the worker down only when started is set.
func TestFailedStartLeavesNoWorkerRunning(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true, lateness: 600ms}
namespace: rvhalf
jobs:
  - name: tick
    schedule: "@every 1m"
    handler: {name: tick}
  - name: single
    mode: singleton
    lock_ttl: 1s
    handler: {name: single}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	for _, name := range []string{"tick", "single"} {
		if err := reg.HandleFunc(name, func(context.Context, jobs.Run) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	r, err := baton.New(cfg, baton.WithReplicaID("rv-half"), baton.WithHandlers(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Start(ctx); err == nil {
		r.Close()
		t.Skip("Start succeeded: this schedule does not arise")
	} else {
		t.Logf("Start: %v", err)
	}
	r.Close()
	closed := time.Now()
	time.Sleep(5 * time.Second) // two roster heartbeats (every 2s)
	ms, err := jobs.ReadRoster(ctx, rdb, "rvhalf")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == "rv-half" && m.Seen.After(closed.Add(time.Second)) {
			t.Errorf("replica rv-half still beats in the roster %v after a failed Start and Close (last seen %v after Close): its worker is running", time.Since(closed).Round(time.Second), m.Seen.Sub(closed).Round(time.Millisecond))
		}
	}
}

// WithLogger's doc says "default: none"; the jobs options ignore a nil
// logger (jobs.WithLogger(nil) keeps the discarding one), as the old
// per-type options did. baton.WithLogger(nil) must not crash New.
func TestNilLoggerIsNoLogger(t *testing.T) {
	cfg, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
jobs:
  - name: tick
    schedule: "@every 1m"
    exec: {command: ["true"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("baton.New with WithLogger(nil) panicked: %v", p)
		}
	}()
	r, err := baton.New(cfg, baton.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}
