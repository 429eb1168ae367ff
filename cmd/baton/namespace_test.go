package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// Two deployments (staging and prod) share one Redis database and have jobs
// of the same names. Each runs every tick of its own jobs once, in its own
// deployment: no worker runs the other's tasks, and neither skips the
// other's ticks as "already enqueued". A tick not run is recorded so in the
// history of its own deployment.
func TestTwoNamespacesOnOneRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	start2 := func(ns string) (*proc, string) {
		out := filepath.Join(dir, ns+".out")
		cfg := filepath.Join(dir, ns+".yaml")
		if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
namespace: %s
jobs:
  - name: report
    schedule: "@every 1s"
    exec:
      command: %s
  - name: local
    schedule: "@every 1s"
    mode: local
    exec:
      command: %s
`, redisURL(srv), ns, tickCommand(out), tickCommand(out))); err != nil {
			t.Fatal(err)
		}
		return start(t, nil, "run", "--config", cfg, "--id", ns+"-1"), out
	}
	rdb := srv.TestClient(t)
	staging, sOut := start2("staging")
	prod, pOut := start2("prod")
	waitRunning(t, 20*time.Second, "5 ticks in each deployment", func() bool {
		return len(readTicks(t, sOut)) >= 10 && len(readTicks(t, pOut)) >= 10
	}, staging, prod)
	signalAndWait(t, staging, syscall.SIGTERM, 0)
	signalAndWait(t, prod, syscall.SIGTERM, 0)
	for ns, out := range map[string]string{"staging": sOut, "prod": pOut} {
		lines := readTicks(t, out)
		byJob := map[string][]string{}
		for _, l := range lines {
			if l.replica != ns+"-1" {
				t.Errorf("%s's tick %s@%s ran on %s", ns, l.job, l.tick, l.replica)
			}
			byJob[l.job] = append(byJob[l.job], l.tick)
		}
		for job, ticks := range byJob {
			// every tick between the first and the last that ran is
			// accounted for in this deployment: it ran once, or its own
			// history says why not (a run that outlasts a second on a busy
			// host holds the job, and the next tick is skipped so)
			notRun := map[int64]jobs.RunRecord{}
			recs, err := history.Read(context.Background(), rdb, ns, job, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if r.Started.IsZero() && r.Status != jobs.StatusDispatched && r.Status != jobs.StatusRunning {
					notRun[r.Tick.Unix()] = r
				}
			}
			slices.Sort(ticks)
			for i := 1; i < len(ticks); i++ {
				a, _ := time.Parse(time.RFC3339, ticks[i-1])
				b, _ := time.Parse(time.RFC3339, ticks[i])
				if !b.After(a) {
					t.Errorf("%s %s: %s ran twice", ns, job, ticks[i])
				}
				for tick := a.Add(time.Second); tick.Before(b); tick = tick.Add(time.Second) {
					if r, ok := notRun[tick.Unix()]; ok {
						t.Logf("%s %s@%s not run: %s: %s", ns, job, tick.Format(time.RFC3339), r.Status, r.Reason)
						continue
					}
					t.Errorf("%s %s: tick %s neither ran nor has a not-run record (ran %s then %s)", ns, job, tick.Format(time.RFC3339), ticks[i-1], ticks[i])
				}
			}
		}
		if len(byJob["report"]) < 3 || len(byJob["local"]) < 3 {
			t.Errorf("%s ran %v", ns, byJob)
		}
	}
	for _, p := range []*proc{staging, prod} {
		if s := p.stderr.String(); strings.Contains(s, "already enqueued") || strings.Contains(s, "archiving") {
			t.Errorf("a deployment saw the other's tasks:\n%s", s)
		}
	}
}
