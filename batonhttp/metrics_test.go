package batonhttp_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/replicatest"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/jobs"
)

// A claimed tick moves its series: claims, dispatches and the dispatch
// lag, the run by status with its start lag and duration, the execution
// lease's acquisition; the replica's info and clock skew are there.
func TestMetricsFollowATick(t *testing.T) {
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: metrics
worker: {shutdown_grace: 2s}
jobs:
  - name: beat
    schedule: "@every 1s"
    handler: {name: beat}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("beat", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	web := replicatest.Serving(t, replicatest.Running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("m-1"), baton.WithVersion("v-test")))
	series := []string{
		`baton_scheduler_owned_total{job="beat",replica="m-1"}`,
		`baton_scheduler_dispatched_total{job="beat",replica="m-1"}`,
		`baton_scheduler_dispatch_lag_seconds_count{job="beat",replica="m-1"}`,
		`baton_worker_runs_total{job="beat",replica="m-1",status="ok"}`,
		`baton_worker_start_lag_seconds_count{job="beat",replica="m-1"}`,
		`baton_worker_run_duration_seconds_count{job="beat",replica="m-1",status="ok"}`,
		`baton_lock_acquisitions_total{replica="m-1"}`,
	}
	before := replicatest.Scrape(t, web.URL)
	var after map[string]float64
	poll.Require(t, 20*time.Second, "two ticks counted in every series", func() bool {
		after = replicatest.Scrape(t, web.URL)
		for _, s := range series {
			if after[s] < before[s]+2 {
				return false
			}
		}
		return true
	})
	for _, s := range []string{
		`baton_replica_info{job_list="` + roster.ListHash(cfg) + `",replica="m-1",role="run",version="v-test"}`,
		`baton_scheduler_clock_skew_seconds{replica="m-1"}`,
		`baton_lock_extension_failures_total{replica="m-1"}`,
		`baton_lock_leases_lost_total{replica="m-1"}`,
		`baton_worker_tasks_refused_total{reason="too_old",replica="m-1"}`,
		`baton_worker_tasks_refused_total{reason="done",replica="m-1"}`,
	} {
		if _, ok := after[s]; !ok {
			t.Errorf("no series %s", s)
		}
	}
	if lost := after[`baton_lock_leases_lost_total{replica="m-1"}`]; lost != 0 {
		t.Errorf("%v leases lost on a healthy Redis", lost)
	}
	if at := after[`baton_worker_last_success_timestamp_seconds{job="beat",replica="m-1"}`]; at < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("last success at %v", at)
	}
	if d := after[`baton_job_interval_seconds{job="beat",replica="m-1"}`]; d != 1 {
		t.Errorf("interval %v, want 1 (@every 1s)", d)
	}
	// the shipped alert rules name only metrics baton serves
	rules, err := os.ReadFile("../deploy/prometheus/baton-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{}
	for series := range after {
		name, _, _ := strings.Cut(series, "{")
		served[name] = true
	}
	for _, name := range regexp.MustCompile(`\bbaton_[a-z_]+`).FindAllString(string(rules), -1) {
		if !served[name] {
			t.Errorf("deploy/prometheus/baton-alerts.yaml names %s, which /metrics does not serve", name)
		}
	}
}

// A brand-new lock master waits out its restart quarantine: the replica
// serves how long it still waits, counting down to 0 when it votes and
// ticks run. The cluster leader and the ticks left to other job lists are
// served from the start.
func TestMetricsFollowMasterQuarantine(t *testing.T) {
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {restart_quarantine: 3s}
scheduler: {tick_lease_ttl: 1s}
namespace: quarantined
worker: {shutdown_grace: 2s}
jobs:
  - name: beat
    schedule: "@every 1s"
    handler: {name: beat}
    lock_ttl: 2s
  - name: tidy
    schedule: "@every 1s"
    mode: local
    leader: true
    handler: {name: beat}
    lock_ttl: 2s
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("beat", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	web := replicatest.Serving(t, replicatest.Running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("q-1")))
	const left = `baton_lock_master_quarantine_remaining_seconds{master="0",replica="q-1"}`
	poll.Require(t, 20*time.Second, "master 0 found in its quarantine", func() bool {
		s := replicatest.Scrape(t, web.URL)
		return s[left] > 0 && s[left] <= 3
	})
	var after map[string]float64
	poll.Require(t, 30*time.Second, "the quarantine over and a run of beat", func() bool {
		after = replicatest.Scrape(t, web.URL)
		return after[left] == 0 && after[`baton_worker_runs_total{job="beat",replica="q-1",status="ok"}`] >= 1
	})
	poll.Require(t, 20*time.Second, "q-1 the cluster leader", func() bool {
		return replicatest.Scrape(t, web.URL)[`baton_cluster_leader{replica="q-1"}`] == 1
	})
	if v, ok := after[`baton_scheduler_left_to_others_total{job="beat",replica="q-1"}`]; !ok || v != 0 {
		t.Errorf("baton_scheduler_left_to_others_total of beat = %v (served: %v), want 0 with one job list", v, ok)
	}
}
