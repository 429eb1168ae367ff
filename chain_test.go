package baton_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// lines reads a log file the jobs append to: one field list per line.
func lines(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" {
			out = append(out, strings.Fields(l))
		}
	}
	return out
}

// A chain across three replicas: for each tick of extract that succeeded,
// load runs once, after extract's run ended; for each that failed, load's
// tick is skipped, naming extract's failure; load never runs a tick twice
// nor one extract did not end. The ledger said "waiting for extract@T" of
// a load tick while its extract ran.
func TestAChainRunsOnceAfterEachParentTickAcrossReplicas(t *testing.T) {
	srv := redistest.New(t)
	dir := t.TempDir()
	// extract fails on the ticks whose second divides by 3, and runs 300 ms
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: chain
worker: {shutdown_grace: 2s}
jobs:
  - name: extract
    schedule: "@every 1s"
    max_retry: 0
    concurrency: allow
    exec:
      command: ["sh", "-c", "sleep 0.3; s=$${BATON_TICK#*:*:}; s=$${s%%Z}; s=$${s#0}; if [ $(($s %% 3)) -eq 0 ]; then echo \"$BATON_TICK $(date +%%s%%N)\" >> %[2]s/extract-failed; exit 1; fi; echo \"$BATON_TICK $(date +%%s%%N)\" >> %[2]s/extract-ok"]
  - name: load
    after: [extract]
    concurrency: allow
    exec:
      command: ["sh", "-c", "echo \"$BATON_TICK $(date +%%s%%N)\" >> %[2]s/load"]
`, srv.Addr(), dir))
	if err != nil {
		t.Fatal(err)
	}
	c := openCluster(t, cfg)
	for i := 1; i <= 3; i++ {
		running(t, cfg, baton.WithReplicaID(fmt.Sprintf("chain-%d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// a load tick waiting for its extract, seen in the ledger
	sawWaiting := ""
	poll.Require(t, 30*time.Second, "eight extract ticks ended", func() bool {
		if sawWaiting == "" {
			if l, err := c.Ticks(ctx, "load", time.Now().Add(-5*time.Second), time.Now()); err == nil {
				for _, lt := range l.Ticks {
					if lt.Outcome == baton.OutcomeDispatched && strings.HasPrefix(lt.Reason, "waiting for extract@") {
						sawWaiting = lt.Reason
					}
				}
			}
		}
		return len(lines(t, filepath.Join(dir, "extract-ok")))+len(lines(t, filepath.Join(dir, "extract-failed"))) >= 8
	})
	// every extract tick ended so far has its load tick decided, by history
	ended := map[string]string{} // tick -> ok | failed
	endedAt := map[string]int64{}
	for _, f := range []string{"extract-ok", "extract-failed"} {
		for _, l := range lines(t, filepath.Join(dir, f)) {
			ended[l[0]] = strings.TrimPrefix(f, "extract-")
			endedAt[l[0]], _ = strconv.ParseInt(l[1], 10, 64)
		}
	}
	var recs []jobs.RunRecord
	poll.Require(t, 30*time.Second, "load's ticks of the extract ticks ended decided", func() bool {
		recs, _ = c.History(ctx, "load", 0)
		decided := map[string]bool{}
		for _, r := range recs {
			if r.Status == jobs.StatusOK || r.Status == jobs.StatusSkipped {
				decided[r.Tick.UTC().Format(time.RFC3339)] = true
			}
		}
		for tick := range ended {
			if !decided[tick] {
				return false
			}
		}
		return true
	})
	runs := map[string][]int64{}
	for _, l := range lines(t, filepath.Join(dir, "load")) {
		at, _ := strconv.ParseInt(l[1], 10, 64)
		runs[l[0]] = append(runs[l[0]], at)
	}
	for tick, how := range ended {
		switch {
		case how == "ok" && len(runs[tick]) != 1:
			t.Errorf("extract@%s succeeded; load ran it %d times", tick, len(runs[tick]))
		case how == "ok" && runs[tick][0] < endedAt[tick]:
			t.Errorf("load@%s started before extract's run of it ended", tick)
		case how == "failed" && len(runs[tick]) != 0:
			t.Errorf("extract@%s failed; load ran it %d times", tick, len(runs[tick]))
		}
	}
	for tick, at := range runs {
		if ended[tick] != "ok" && len(at) > 0 {
			if _, seen := ended[tick]; seen || len(at) > 1 {
				t.Errorf("load ran %s %d times, extract's tick %q", tick, len(at), ended[tick])
			}
		}
	}
	skippedRight := 0
	for _, r := range recs {
		tick := r.Tick.UTC().Format(time.RFC3339)
		if ended[tick] == "failed" {
			if r.Status != jobs.StatusSkipped || !strings.HasPrefix(r.Reason, "extract@"+tick+" failed: ") {
				t.Errorf("load@%s, whose extract failed, recorded %s %q", tick, r.Status, r.Reason)
			} else {
				skippedRight++
			}
		}
	}
	if skippedRight == 0 {
		t.Errorf("no load tick recorded skipped for a failed extract (ended %v)", ended)
	}
	if sawWaiting == "" {
		t.Errorf("the ledger never said a load tick waited for its extract")
	}
}

// A chain's backfill runs its links in order, each once per tick: a
// window of four seconds in which no scheduler ran extract, load (after
// extract) and report (after load), but for the first tick, which extract
// ran. BackfillChain("extract") dispatches extract's three
// ticks that never ran and all the ticks of load and report: each load
// tick starts after its extract's run ended (extract takes a second, so a
// load run at once would start first), each report tick after its load's;
// the first tick's load runs on the success the history records for
// extract (its outcome record is gone); the tick extract fails is skipped
// by load, naming extract's failure, and by report, naming load's skip.
func TestABackfilledChainRunsEachLinkAfterItsParents(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	dir := t.TempDir()
	// the window: four ticks after the history's first records, which
	// tell that the ticks after them without a record never ran
	first := time.Now().UTC().Truncate(time.Second)
	tick := func(i int) time.Time { return first.Add(time.Duration(i+2) * time.Second) }
	rfc := func(i int) string { return tick(i).Format(time.RFC3339) }
	if err := os.WriteFile(filepath.Join(dir, "fail"), []byte(rfc(2)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: bfchain
worker: {shutdown_grace: 2s}
jobs:
  - name: extract
    schedule: "* * * * * *"
    max_retry: 0
    concurrency: allow
    exec:
      command: ["sh", "-c", "sleep 1; if grep -qx \"$BATON_TICK\" %[2]s/fail; then exit 1; fi; echo \"$BATON_TICK $(date +%%s%%N)\" >> %[2]s/extract"]
  - name: load
    after: [extract]
    concurrency: allow
    exec:
      command: ["sh", "-c", "echo \"$BATON_TICK $(date +%%s%%N)\" >> %[2]s/load; sleep 0.5; echo \"$BATON_TICK $(date +%%s%%N)\" >> %[2]s/load-end"]
  - name: report
    after: [load]
    concurrency: allow
    exec:
      command: ["sh", "-c", "echo \"$BATON_TICK $(date +%%s%%N)\" >> %[2]s/report"]
`, srv.Addr(), dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"extract", "load", "report"} {
		newHistoryStream(t, rdb, "bfchain", job, cfg.History.Runs).paused(t, first)
	}
	poll.Require(t, 10*time.Second, "the window passed", func() bool { return time.Now().After(tick(3).Add(100 * time.Millisecond)) })
	newHistoryStream(t, rdb, "bfchain", "extract", cfg.History.Runs).ran(t, tick(0), "ran-before")
	c := openCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dry, err := c.BackfillChain(ctx, "extract", tick(0), tick(3), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) != 3 || dry[0].Job != "extract" || dry[1].Job != "load" || dry[2].Job != "report" {
		t.Fatalf("dry run's links %+v, want extract, load, report", dry)
	}
	if len(dry[0].Ticks) != 3 || dry[0].Ran != 1 || len(dry[1].Ticks) != 4 || len(dry[2].Ticks) != 4 {
		t.Errorf("dry run: extract %d ticks (%d ran), load %d, report %d; want 3 (1), 4, 4", len(dry[0].Ticks), dry[0].Ran, len(dry[1].Ticks), len(dry[2].Ticks))
	}
	if !dry[0].AwaitUntil.IsZero() || !dry[1].AwaitUntil.After(time.Now()) || dry[2].AwaitUntil.Before(dry[1].AwaitUntil) {
		t.Errorf("waits: extract %s, load %s, report %s; want none, then later, then no earlier", dry[0].AwaitUntil, dry[1].AwaitUntil, dry[2].AwaitUntil)
	}
	if ids := pendingTasks(t, rdb, cfg.QueueName("default")); len(ids) > 0 {
		t.Fatalf("a dry run enqueued %v", ids)
	}
	// workers only: the live schedule dispatches nothing
	for i := 1; i <= 2; i++ {
		running(t, cfg, baton.WithRole(baton.RoleWorker), baton.WithReplicaID(fmt.Sprintf("bf-%d", i)))
	}
	plans, err := c.BackfillChain(ctx, "extract", tick(0), tick(3), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		if len(p.Dispatched) != len(p.Ticks) || len(p.Failed) > 0 {
			t.Errorf("%s: dispatched %d of %d ticks, failed %v (%s)", p.Job, len(p.Dispatched), len(p.Ticks), p.Failed, p.Reason)
		}
	}
	var recs []jobs.RunRecord
	decided := func(recs []jobs.RunRecord) (n int) {
		for _, r := range recs {
			if r.Status == jobs.StatusOK || r.Status == jobs.StatusSkipped || r.Status == jobs.StatusFailed {
				n++
			}
		}
		return n
	}
	poll.Require(t, 60*time.Second, "extract's four ticks and report's decided", func() bool {
		recs, _ = c.History(ctx, "report", 0)
		ex, _ := c.History(ctx, "extract", 0)
		return decided(recs) >= 4 && decided(ex) >= 4
	})
	at := func(file string) map[string][]int64 {
		out := map[string][]int64{}
		for _, l := range lines(t, filepath.Join(dir, file)) {
			ns, _ := strconv.ParseInt(l[1], 10, 64)
			out[l[0]] = append(out[l[0]], ns)
		}
		return out
	}
	extract, load, loadEnd, report := at("extract"), at("load"), at("load-end"), at("report")
	if len(extract) != 2 || len(extract[rfc(1)]) != 1 || len(extract[rfc(3)]) != 1 {
		t.Errorf("extract's successful runs %v, want one each of %s and %s", extract, rfc(1), rfc(3))
	}
	for _, i := range []int{0, 1, 3} {
		tk := rfc(i)
		switch {
		case len(load[tk]) != 1 || len(report[tk]) != 1:
			t.Errorf("tick %s: load ran %d times, report %d; want once each", tk, len(load[tk]), len(report[tk]))
		case i > 0 && (len(extract[tk]) != 1 || load[tk][0] < extract[tk][0]):
			t.Errorf("load@%s started before extract's run of it ended", tk)
		case len(loadEnd[tk]) != 1 || report[tk][0] < loadEnd[tk][0]:
			t.Errorf("report@%s started before load's run of it ended", tk)
		}
	}
	if len(load[rfc(2)]) != 0 || len(report[rfc(2)]) != 0 {
		t.Errorf("extract@%s failed; load ran it %d times, report %d", rfc(2), len(load[rfc(2)]), len(report[rfc(2)]))
	}
	skipped := func(job string, recs []jobs.RunRecord, prefix string) {
		t.Helper()
		for _, r := range recs {
			if r.Tick.Equal(tick(2)) && r.Status == jobs.StatusSkipped && strings.HasPrefix(r.Reason, prefix) {
				return
			}
		}
		t.Errorf("%s@%s not recorded skipped with a reason beginning %q: %+v", job, rfc(2), prefix, recs)
	}
	loadRecs, err := c.History(ctx, "load", 0)
	if err != nil {
		t.Fatal(err)
	}
	skipped("load", loadRecs, "extract@"+rfc(2)+" failed")
	skipped("report", recs, "load@"+rfc(2)+" skipped")
}
