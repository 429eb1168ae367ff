package baton_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// Stats follows a tick without any HTTP: the claim and the dispatch with
// its lag, the run by status with its start lag and duration, the worker's
// counter, the execution lease; the job's interval and the replica's
// identity are there from the start.
func TestStatsFollowATick(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: stats
worker: {shutdown_grace: 2s}
jobs:
  - name: beat
    schedule: "@every 1s"
    handler: {name: beat}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("beat", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	r := running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("s-1"), baton.WithVersion("v-test"))
	if s := r.Stats(); s.ID != "s-1" || s.Version != "v-test" || s.Role != baton.RoleAll || s.JobList == "" ||
		s.Scheduler == nil || s.Jobs["beat"].Interval != time.Second || s.LeaderJobs {
		t.Fatalf("Stats at start: %+v", s)
	}
	var s baton.ReplicaStats
	poll.Require(t, 20*time.Second, "two ticks in every count", func() bool {
		s = r.Stats()
		jm := s.Jobs["beat"]
		ok := jm.Runs[jobs.StatusOK]
		return s.Scheduler.Jobs["beat"].Owned >= 2 && s.Scheduler.Jobs["beat"].Dispatched >= 2 &&
			jm.DispatchLag != nil && jm.DispatchLag.Count >= 2 && ok.Count >= 2 &&
			jm.StartLag != nil && jm.StartLag.Count >= 2 && ok.Duration != nil && ok.Duration.Count >= 2 &&
			s.Worker["beat"].Ran >= 2 && s.Locks.Acquired >= 2
	})
	if at := s.Jobs["beat"].LastSuccess; time.Since(at) > time.Minute {
		t.Errorf("last success at %v", at)
	}
	if h := s.Jobs["beat"].DispatchLag; len(h.Bounds) != 16 || h.Bounds[0] != 0.001 || len(h.Cumulative) != 16 || h.Cumulative[15] > h.Count {
		t.Errorf("dispatch lag histogram %+v: want 16 buckets from 1ms, cumulative", h)
	}
	if s.Locks.Lost != 0 || s.Scheduler.Skewed {
		t.Errorf("on a healthy Redis: %d leases lost, skewed %v", s.Locks.Lost, s.Scheduler.Skewed)
	}
	if _, ok := s.Refused["too_old"]; !ok {
		t.Errorf("no refusal reason too_old listed: %v", s.Refused)
	}
	if len(s.Masters) != 1 || s.Masters[0].Index != 0 || s.Masters[0].Quarantine != 0 {
		t.Errorf("masters %+v, want master 0 voting", s.Masters)
	}
}
