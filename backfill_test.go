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

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/schedule"
)

// pausedWhileLive writes what the live scheduler writes for a tick of
// a paused job (handoff.Sender.NotDispatched): a paused record in the
// history and, for a job others run after, a paused outcome record.
func pausedWhileLive(t *testing.T, rdb *redis.Client, cfg *config.Config, job string, at time.Time) {
	t.Helper()
	newHistoryStream(t, rdb, cfg.Namespace, job, cfg.History.Runs).paused(t, at)
	if err := chain.Record(context.Background(), rdb, cfg.Namespace, job, at, handoff.OutcomeTTL(cfg, job),
		chain.Outcome{Status: jobs.StatusPaused, Reason: "the job is paused"}); err != nil {
		t.Fatal(err)
	}
}

// ticksIn are the distinct $BATON_TICK values a job's log file holds.
func ticksIn(t *testing.T, path string) map[string]bool {
	out := map[string]bool{}
	for _, l := range lines(t, path) {
		out[l[0]] = true
	}
	return out
}

// A chain's backfill leaves a descendant's tick alone when the tick of
// its parent link at that instant is not one the backfill covers: A ticks
// at even seconds, Z at odd ones, B runs after A and Z (so B's backfill
// from A takes A's instants only), C runs after B. All four were paused over the
// window. BackfillChain(A) must not dispatch C at the odd seconds (B's
// tick there is Z's business, not backfilled): it would be skipped for
// B's old pause, and, recorded done, never run by the later
// BackfillChain(Z) that does run B's odd ticks.
func TestAChainBackfillLeavesADescendantTickWhoseParentLinkTickItDoesNotCover(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	dir := t.TempDir()
	first := time.Now().UTC().Truncate(2 * time.Second)
	tick := func(i int) time.Time { return first.Add(time.Duration(i+2) * time.Second) }
	cmd := func(name string) string {
		return fmt.Sprintf(`["sh", "-c", "echo \"$BATON_TICK\" >> %s"]`, filepath.Join(dir, name))
	}
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: bfcover
worker: {shutdown_grace: 2s}
jobs:
  - name: a
    schedule: "*/2 * * * * *"
    concurrency: allow
    exec: {command: %s}
  - name: z
    schedule: "1-59/2 * * * * *"
    concurrency: allow
    exec: {command: %s}
  - name: b
    after: [a, z]
    concurrency: allow
    exec: {command: %s}
  - name: c
    after: [b]
    concurrency: allow
    exec: {command: %s}
`, srv.Addr(), cmd("a"), cmd("z"), cmd("b"), cmd("c")))
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"a", "z", "b", "c"} {
		newHistoryStream(t, rdb, cfg.Namespace, job, cfg.History.Runs).paused(t, first)
	}
	poll.Require(t, 10*time.Second, "the window passed", func() bool { return time.Now().After(tick(3).Add(100 * time.Millisecond)) })
	for i := range 4 {
		for _, job := range []string{"a", "z", "b", "c"} {
			if j, _ := cfg.Job(job); schedHas(j, tick(i)) {
				pausedWhileLive(t, rdb, cfg, job, tick(i))
			}
		}
	}
	c := openCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dry, err := c.BackfillChain(ctx, "a", tick(0), tick(3), true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) != 3 || len(dry[1].Ticks) != 2 || len(dry[2].Ticks) != len(dry[1].Ticks) {
		t.Errorf("dry run from a: %+v; want b and c each at a's 2 instants", dry)
	}
	for i := 1; i <= 2; i++ {
		running(t, cfg, baton.WithRole(baton.RoleWorker), baton.WithReplicaID(fmt.Sprintf("cov-%d", i)))
	}
	if _, err := c.BackfillChain(ctx, "a", tick(0), tick(3), false); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 30*time.Second, "c ran a's instants", func() bool { return len(ticksIn(t, filepath.Join(dir, "c"))) >= 2 })
	if _, err := c.BackfillChain(ctx, "z", tick(0), tick(3), false); err != nil {
		t.Fatal(err)
	}
	if !poll.Until(30*time.Second, func() bool { return len(ticksIn(t, filepath.Join(dir, "c"))) >= 4 }) {
		recs, _ := c.History(ctx, "c", 0)
		t.Errorf("after backfilling the chains from a and from z, c ran %v; want all 4 ticks; c's history: %+v", ticksIn(t, filepath.Join(dir, "c")), recs)
	}
}

// A parent outside the chain that was backfilled first (as BackfillChain's
// doc says to) holds its children's ticks until its backfilled run ends:
// C runs after A and B; all three were paused over the window (the
// scheduler wrote paused outcome records for A's and B's ticks). B is
// backfilled (its run takes 3 s), then the chain from A: C must run each
// tick after B's backfilled run, not be skipped for B's old pause.
func TestABackfilledChildWaitsForAParentOutsideTheChainBackfilledFirst(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	dir := t.TempDir()
	first := time.Now().UTC().Truncate(time.Second)
	tick := func(i int) time.Time { return first.Add(time.Duration(i+2) * time.Second) }
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%[1]s/0"}
locking: {fresh_deployment: true}
namespace: bfoutside
worker: {shutdown_grace: 2s}
jobs:
  - name: a
    schedule: "* * * * * *"
    concurrency: allow
    exec: {command: ["true"]}
  - name: b
    schedule: "* * * * * *"
    concurrency: allow
    exec: {command: ["sh", "-c", "sleep 3; echo \"$BATON_TICK\" >> %[2]s/b"]}
  - name: c
    after: [a, b]
    concurrency: allow
    exec: {command: ["sh", "-c", "echo \"$BATON_TICK\" >> %[2]s/c"]}
`, srv.Addr(), dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"a", "b", "c"} {
		newHistoryStream(t, rdb, cfg.Namespace, job, cfg.History.Runs).paused(t, first)
	}
	poll.Require(t, 10*time.Second, "the window passed", func() bool { return time.Now().After(tick(1).Add(100 * time.Millisecond)) })
	for i := range 2 {
		for _, job := range []string{"a", "b", "c"} {
			pausedWhileLive(t, rdb, cfg, job, tick(i))
		}
	}
	for i := 1; i <= 2; i++ {
		running(t, cfg, baton.WithRole(baton.RoleWorker), baton.WithReplicaID(fmt.Sprintf("out-%d", i)))
	}
	c := openCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if p, err := c.Backfill(ctx, "b", tick(0), tick(1), false); err != nil || len(p.Dispatched) != 2 {
		t.Fatalf("backfill of b: %+v %v", p, err)
	}
	if _, err := c.BackfillChain(ctx, "a", tick(0), tick(1), false); err != nil {
		t.Fatal(err)
	}
	var recs []jobs.RunRecord
	poll.Require(t, 30*time.Second, "c's two ticks decided", func() bool {
		recs, _ = c.History(ctx, "c", 0)
		n := 0
		for _, r := range recs {
			if !r.Tick.Equal(first) && (r.Status == jobs.StatusOK || r.Status == jobs.StatusSkipped || r.Status.Failed()) {
				n++
			}
		}
		return n >= 2
	})
	poll.Require(t, 20*time.Second, "b's backfilled runs ended", func() bool { return len(ticksIn(t, filepath.Join(dir, "b"))) >= 2 })
	if got := ticksIn(t, filepath.Join(dir, "c")); len(got) != 2 {
		t.Errorf("b's backfilled ticks succeeded, but c ran %v; want both ticks; c's history: %+v", got, recs)
	}
}

// schedHas reports whether j's schedule has a tick at at.
func schedHas(j *config.Job, at time.Time) bool {
	return schedule.Has(j.Sched, at)
}

// A chain's link waits no less than the link it runs after, also when
// that link's run window is unbounded (a timeout of 10 years or more):
// report after load after extract; load's timeout is 100000h.
func TestABackfilledGrandchildWaitsNoLessThanAnUnboundedParent(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	first := time.Now().UTC().Truncate(time.Second)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: bfunbounded
jobs:
  - name: extract
    schedule: "* * * * * *"
    concurrency: allow
    exec: {command: ["true"]}
  - name: load
    after: [extract]
    timeout: 100000h
    concurrency: allow
    exec: {command: ["true"]}
  - name: report
    after: [load]
    concurrency: allow
    exec: {command: ["true"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"extract", "load", "report"} {
		newHistoryStream(t, rdb, cfg.Namespace, job, cfg.History.Runs).paused(t, first)
	}
	at := first.Add(2 * time.Second)
	poll.Require(t, 10*time.Second, "the window passed", func() bool { return time.Now().After(at.Add(100 * time.Millisecond)) })
	c := openCluster(t, cfg)
	dry, err := c.BackfillChain(context.Background(), "extract", at, at, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) != 3 || dry[2].AwaitUntil.Before(dry[1].AwaitUntil) {
		t.Errorf("load waits until %s, report (after load) until %s: it gives up first", dry[1].AwaitUntil, dry[2].AwaitUntil)
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
	t.Parallel() // its own Redis and replicas
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

// A chain's backfill finds the runtime schedules that run after its jobs
// (the Cluster reads them from the store) and plans them after their
// parents, each waiting longer than its parent: a job of the list, a
// runtime schedule after it, another after that one. (The dispatch of a
// planned link is the job list's: TestABackfilledChainRunsEachLinkAfterItsParents.)
func TestAChainBackfillPlansItsRuntimeLinksAfterTheirParents(t *testing.T) {
	t.Parallel() // its own Redis
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	first := time.Now().UTC().Truncate(time.Second)
	tick := func(i int) time.Time { return first.Add(time.Duration(i+2) * time.Second) }
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: bfrt
jobs:
  - {name: extract, schedule: "* * * * * *", concurrency: allow, handler: {name: h}}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := openCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range []struct{ id, after string }{{"load", "extract"}, {"report", "@load"}} {
		if _, err := c.PutSchedule(ctx, p.id, baton.ScheduleSpec{After: []string{p.after}, Handler: "h", Concurrency: config.ConcurrencyAllow}, baton.AheadOfDeploy()); err != nil {
			t.Fatal(err)
		}
	}
	newHistoryStream(t, rdb, "bfrt", "extract", cfg.History.Runs).paused(t, first)
	poll.Require(t, 10*time.Second, "the window passed", func() bool { return time.Now().After(tick(3).Add(100 * time.Millisecond)) })
	dry, err := c.BackfillChain(ctx, "extract", tick(0), tick(3), true)
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, p := range dry {
		links = append(links, p.Job)
	}
	if strings.Join(links, " ") != "extract @load @report" {
		t.Fatalf("links %v, want extract, @load, @report", links)
	}
	for i, p := range dry {
		if len(p.Ticks) != 4 {
			t.Errorf("%s plans %d ticks, want the window's 4", p.Job, len(p.Ticks))
		}
		if i > 0 && !p.AwaitUntil.After(dry[i-1].AwaitUntil) {
			t.Errorf("%s waits until %s, not after its parent %s (%s)", p.Job, p.AwaitUntil, dry[i-1].Job, dry[i-1].AwaitUntil)
		}
	}
}
