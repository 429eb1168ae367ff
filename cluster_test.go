package baton_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batontest"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
)

// On a brand-new Redis that a replica uses without baton init, Status shows
// the master in its restart quarantine: why (no marker) and until when, and
// its attention line says how a brand-new set skips the wait.
func TestStatusShowsMasterInQuarantineWithWhyAndUntil(t *testing.T) {
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
namespace: seen
jobs:
  - name: beat
    schedule: "@every 1s"
    exec: {command: ["true"]}
  - name: pump
    mode: singleton
    exec: {command: ["sleep", "60"]}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	running(t, cfg)
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var st *baton.Status
	poll.Require(t, 20*time.Second, "the master in quarantine", func() bool {
		st, err = c.Status(ctx)
		return st != nil && len(st.Masters) == 1 && st.Masters[0].State == locking.MasterQuarantine
	})
	// the quarantine is no failed status: the singleton's unknown leader is a warning
	if err != nil {
		t.Errorf("Status in the quarantine: %v, want no error (the masters say why)", err)
	}
	if !slices.ContainsFunc(st.Warnings, func(w string) bool { return strings.Contains(w, "singleton leaders are not known until") }) {
		t.Errorf("warnings %q: want one that singleton leaders are not known until the quarantine ends", st.Warnings)
	}
	m := st.Masters[0]
	if m.Why != locking.WhyNoMarker || m.Until.Sub(st.Time) < 30*time.Second || m.Until.Sub(st.Time) > time.Minute+time.Second {
		t.Errorf("master %+v: want why %q, until about a minute after %v", m, locking.WhyNoMarker, st.Time)
	}
	att := st.MastersAttention()
	if len(att) != 1 || !strings.Contains(att[0], "lock master 0 ("+srv.Addr()+") in its restart quarantine until ") ||
		!strings.Contains(att[0], locking.WhyNoMarker) || !strings.Contains(att[0], "baton init --config FILE") || !strings.Contains(att[0], "ends by itself") {
		t.Errorf("attention %q: want master 0 in quarantine, why, that it ends by itself, and baton init --config FILE", att)
	}
}

// Status tells per job how many runs failed since its last success and
// when that success ended, also when the streak is longer than the runs
// Status reads at first; and it gives no next tick to a job that is done.
func TestStatusFailureStreakAndLastSuccess(t *testing.T) {
	srv := redistest.New(t)
	var n atomic.Int32
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("flaky", func(context.Context, jobs.Run) error {
		if n.Add(1) == 1 {
			return nil
		}
		return errors.New("vendor down")
	}); err != nil {
		t.Fatal(err)
	}
	if err := reg.HandleFunc("once", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(time.Minute).Truncate(time.Minute)
	env := batontest.Load(t, `jobs:
  - name: flaky
    schedule: "@every 1m"
    max_retry: 0
    handler: {name: flaky}
  - name: once
    schedule: "@every 1m"
    max_runs: 1
    handler: {name: once}
  - name: fine
    schedule: "@every 1m"
    handler: {name: once}
`, batontest.WithHandlers(reg), batontest.WithRedis("redis://"+srv.Addr()+"/0"), batontest.WithStart(start))
	env.AdvanceTo(t, start.Add(24*time.Minute))
	st, err := env.Cluster(t).Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	runs := env.Runs(t, "flaky")
	var firstOK jobs.RunRecord
	for _, r := range runs {
		if r.Status == jobs.StatusOK {
			firstOK = r
		}
	}
	for _, js := range st.Jobs {
		switch js.Name {
		case "flaky":
			if want := len(runs) - 1; want <= 20 || js.FailureStreak != want || firstOK.Ended.IsZero() || !js.LastSuccess.Equal(firstOK.Ended) {
				t.Errorf("flaky: streak %d, last success %v; want %d (more than 20) and %v", js.FailureStreak, js.LastSuccess, want, firstOK.Ended)
			}
		case "once":
			if js.Done == "" || !js.Next.IsZero() || js.FailureStreak != 0 || js.LastSuccess.IsZero() {
				t.Errorf("once, done: %+v", js)
			}
		case "fine":
			if js.Done != "" || js.Next.IsZero() || js.FailureStreak != 0 || js.LastSuccess.IsZero() {
				t.Errorf("fine: %+v", js)
			}
		}
	}
}
