package baton_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batontest"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// On a brand-new Redis that a replica uses without baton init, Status shows
// the master in its restart quarantine: why (no marker) and until when, and
// its attention line says how a brand-new set skips the wait.
func TestStatusShowsMasterInQuarantineWithWhyAndUntil(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

// G1, schedule: a job ran ticks N (4-2h ago, history has them); then a
// backfill of a long paused window P (10h ago) wrote ~500 history events
// of OLD ticks; history.runs (100 -> ~300 entries) trimmed the N events
// away. history.Coverage takes the oldest remaining entry's *tick* (an old
// P tick) as the coverage start, so a later backfill over the N window is
// allowed, finds "no run" for every N tick (records and asynq IDs expired
// long ago) and dispatches ticks that ran.
func TestBackfillTrustsHistoryTrimmedOutOfOrder(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := oneJobConfig(t, srv.Addr(), "rvtrim", "")
	h := newHistoryStream(t, rdb, "rvtrim", "b", cfg.History.Runs)
	now := time.Now().UTC().Truncate(time.Minute)
	pTick := func(i int) time.Time { return now.Add(-10 * time.Hour).Add(time.Duration(i) * time.Minute) }
	nTick := func(i int) time.Time { return now.Add(-4 * time.Hour).Add(time.Duration(i) * time.Minute) }
	for i := range 250 { // 10h ago: paused
		h.paused(t, pTick(i))
	}
	for i := range 120 { // 4h..2h ago: ran
		h.ran(t, nTick(i), fmt.Sprintf("n%03d", i))
	}
	for i := range 250 { // now: the backfill of the paused window ran
		h.ran(t, pTick(i), fmt.Sprintf("p%03d", i))
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plan, err := c.Backfill(ctx, "b", nTick(0), nTick(119), true)
	if err != nil {
		t.Logf("dry run refused (the safe answer): %v", err)
		return
	}
	if len(plan.Ticks) != 0 {
		t.Errorf("dry run over ticks that all ran: %d listed as never ran, %d ran (window accepted although their history was trimmed)", len(plan.Ticks), plan.Ran)
	}
	// and a real backfill of three of them enqueues them again
	plan, err = c.Backfill(ctx, "b", nTick(0), nTick(2), false)
	if err != nil {
		t.Fatal(err)
	}
	if ids := pendingTasks(t, rdb, cfg.QueueName("default")); len(ids) > 0 {
		t.Errorf("ticks that ran were enqueued again: %v (plan: dispatched %v)", ids, plan.Dispatched)
	}
}

// G1, schedule: history.runs was 100 while 200 ticks ran (the stream was
// trimmed to ~300 entries); the operator raises history.runs to 1000.
// history.Coverage decides "never trimmed by count" from the current
// setting (XLEN < 3000) and vouches for the whole max_age: the trimmed
// ticks are listed as never ran.
func TestBackfillAfterHistoryRunsRaised(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	old := oneJobConfig(t, srv.Addr(), "rvraise", "")
	h := newHistoryStream(t, rdb, "rvraise", "b", old.History.Runs)
	now := time.Now().UTC().Truncate(time.Minute)
	tick := func(i int) time.Time { return now.Add(-5 * time.Hour).Add(time.Duration(i) * time.Minute) }
	for i := range 200 {
		h.ran(t, tick(i), fmt.Sprintf("r%03d", i))
	}
	t.Logf("stream length after trimming: %d", rdb.XLen(context.Background(), "rvraise:{history:b}").Val())
	cfg := oneJobConfig(t, srv.Addr(), "rvraise", "history: {runs: 1000}")
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plan, err := c.Backfill(ctx, "b", tick(0), tick(199), true)
	if err != nil {
		t.Logf("refused (the safe answer): %v", err)
		return
	}
	if len(plan.Ticks) != 0 {
		t.Errorf("all 200 ticks ran; the dry run lists %d as never ran (first %s), ran %d", len(plan.Ticks), plan.Ticks[0].Format(time.RFC3339), plan.Ran)
	}
}

// Locks on a Redis Cluster (redis.cluster, no locking.masters: the cluster
// is the one lock "master"), schedule: 12 locks held, spread over the
// cluster's slots. locking.Held runs SCAN on the cluster client, which
// go-redis sends to one (random) node: baton locks / GET /api/locks /
// status's Lock column list only the locks on that node.
func TestLocksOnARedisCluster(t *testing.T) {
	t.Parallel()
	addrs := redistest.NewCluster(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {cluster: {addrs: [%q, %q, %q]}}
locking: {fresh_deployment: true}
namespace: rvcl
jobs:
  - name: b
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, addrs[0], addrs[1], addrs[2])))
	if err != nil {
		t.Fatal(err)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	locks, err := locking.New(cc, locking.WithPrefix("rvcl:lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var leases []*locking.Lease
	for i := range 12 {
		l, err := locks.TryLock(ctx, fmt.Sprintf("job-%d", i), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	defer func() {
		for _, l := range leases {
			_ = l.Release(context.Background())
		}
	}()
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		held, err := c.Locks(ctx)
		if len(held) != 12 {
			t.Errorf("12 locks held on the cluster, Cluster.Locks lists %d (%v)", len(held), err)
		}
	}
}

// Locks listing, schedule: `baton lock` names with glob characters and
// braces; and another namespace's lock. Each is listed once, under its own
// name, in its own namespace only (expected to pass).
func TestLocksWithGlobNames(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := oneJobConfig(t, srv.Addr(), "rvglob", "")
	mk := func(prefix string) *locking.Client {
		l, err := locking.New(rdb, locking.WithPrefix(prefix), locking.WithFreshDeployment())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	ours, theirs := mk("rvglob:lock:"), mk("rvglob2:lock:")
	ctx := context.Background()
	names := []string{"a*", "b?", "[c]", `d\`, "e}f", "{g}", "h}:fence"}
	for _, n := range names {
		if _, err := ours.TryLock(ctx, n, time.Minute); err != nil {
			t.Fatal(n, err)
		}
	}
	if _, err := theirs.TryLock(ctx, "other-namespace", time.Minute); err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, err := c.Locks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, h := range held {
		got[h.Name]++
	}
	for _, n := range names {
		if got[n] != 1 {
			t.Errorf("lock %q listed %d times: %v", n, got[n], got)
		}
	}
	if len(got) != len(names) {
		t.Errorf("listed %v, want exactly %q", got, names)
	}
}

// Status lists each job's next ticks: ten from Next on, by its schedule in
// its zone; fewer when its end or max_runs comes sooner; none for a
// singleton.
func TestStatusListsNextTicks(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: next
jobs:
  - name: nightly
    schedule: "30 2 * * *"
    timezone: Europe/Berlin
    exec: {command: ["true"]}
  - name: thrice
    schedule: "@hourly"
    max_runs: 3
    exec: {command: ["true"]}
  - name: pump
    mode: singleton
    exec: {command: ["true"]}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"nightly": 10, "thrice": 3, "pump": 0}
	for _, j := range st.Jobs {
		if len(j.NextTicks) != want[j.Name] {
			t.Errorf("%s: %d next ticks %v, want %d", j.Name, len(j.NextTicks), j.NextTicks, want[j.Name])
			continue
		}
		if len(j.NextTicks) > 0 && !j.NextTicks[0].Equal(j.Next) {
			t.Errorf("%s: next ticks start at %v, want Next %v", j.Name, j.NextTicks[0], j.Next)
		}
		for i, tick := range j.NextTicks {
			if i > 0 && !tick.After(j.NextTicks[i-1]) {
				t.Errorf("%s: next ticks out of order: %v", j.Name, j.NextTicks)
			}
			if b := tick.In(berlin); j.Name == "nightly" && (b.Hour() != 2 || b.Minute() != 30) {
				t.Errorf("nightly's next tick %v is %v in Berlin, want 02:30", tick, b)
			}
		}
	}
}

// A replica whose roster entry is of a newer format than this release
// reads (a later release, mid-upgrade) is listed live, with its version
// saying so, not with blank or misread members.
func TestStatusShowsAReplicaOfANewerRosterFormat(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf("redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: nr\njobs: []\n", srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	rdb := srv.TestClient(t)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	newer := formats.RosterEntry + 1
	entry := fmt.Sprintf(`%d {"v":%d,"version":7,"role":["run"],"queues":"all"}`, now.UnixMilli(), newer)
	if err := rdb.HSet(ctx, roster.Keys("nr")[0], "later#1", entry).Err(); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Status(ctx)
	i := slices.IndexFunc(st.Replicas, func(r baton.ReplicaStatus) bool { return r.ID == "later" })
	if i < 0 {
		t.Fatalf("replicas %+v: the later one is missing", st.Replicas)
	}
	r := st.Replicas[i]
	if !r.Live || r.NewerFormat != newer || !strings.Contains(r.Version, "a later release") || r.Role != "unknown" || r.Differs {
		t.Fatalf("the later replica shows as %+v", r)
	}
}

// The status summarises the runtime schedules without a row each: how
// many, how many paused (and which first), and the ones a live replica
// refuses to run (here: an http URL its config does not allow), with why;
// the ones whose newest runs failed, how many in a row and why; a delete
// forgets its pause and failures. Jobs has the job list's rows only.
func TestStatusSummarisesRuntimeSchedules(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	const list = `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: sum
schedules: {http_prefixes: [%s]}
jobs:
  - name: listed
    schedule: "0 0 1 1 *"
    exec: {command: ["true"]}
`
	cfg, err := config.Load(fmt.Appendf(nil, list, srv.Addr(), `"https://hooks.example/"`))
	if err != nil {
		t.Fatal(err)
	}
	strict, err := config.Load(fmt.Appendf(nil, list, srv.Addr(), ""))
	if err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("report", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := reg.HandleFunc("broken", func(context.Context, jobs.Run) error { return errors.New("tenant db gone") }); err != nil {
		t.Fatal(err)
	}
	running(t, strict, baton.WithReplicaID("strict-1"), baton.WithHandlers(reg))
	for _, id := range []string{"report/a", "report/b"} {
		if _, err := c.PutSchedule(ctx, id, baton.ScheduleSpec{Schedule: "0 9 * * *", Handler: "report"}); err != nil {
			t.Fatal(err)
		}
	}
	// the strict replica allows no URL: put ahead of a deploy (it refuses it)
	if _, err := c.PutSchedule(ctx, "hook/x", baton.ScheduleSpec{Schedule: "0 9 * * *", HTTP: &config.HTTPSpec{URL: "https://hooks.example/x"}}, baton.AheadOfDeploy()); err != nil {
		t.Fatal(err)
	}
	zero := 0
	if _, err := c.PutSchedule(ctx, "report/broken", baton.ScheduleSpec{Schedule: "@every 1s", Handler: "broken", MaxRetry: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PauseSchedule(ctx, "report/b", baton.PauseNote{By: "ops", Note: "tenant left"}); err != nil {
		t.Fatal(err)
	}
	var st *baton.Status
	poll.Require(t, 20*time.Second, "the replica's refusal and two failed runs in the status", func() bool {
		st, err = c.Status(ctx)
		return err == nil && st.Schedules != nil && st.Schedules.Refused == 1 && len(st.Schedules.FailingFirst) == 1 &&
			!strings.HasPrefix(st.Schedules.FailingFirst[0].Why, "1 ")
	})
	s := st.Schedules
	if f := s.FailingFirst[0]; s.Failing != 1 || f.ID != "report/broken" || !strings.Contains(f.Why, "failed runs in a row; last: ") || !strings.Contains(f.Why, "tenant db gone") {
		t.Errorf("failing %d %+v: want report/broken, its streak and reason", s.Failing, s.FailingFirst)
	}
	if s.Count != 4 || s.Paused != 1 || !slices.Equal(s.PausedFirst, []string{"report/b"}) {
		t.Errorf("summary %+v: want 4 schedules, report/b paused", s)
	}
	if len(s.RefusedFirst) != 1 || s.RefusedFirst[0].ID != "hook/x" || s.RefusedFirst[0].Job != "@hook/x" || !strings.Contains(s.RefusedFirst[0].Why, "http_prefixes") {
		t.Errorf("refused %+v: want hook/x, refused for its URL", s.RefusedFirst)
	}
	if len(st.Jobs) != 1 {
		t.Errorf("jobs %d: want the listed job's row only", len(st.Jobs))
	}
	if err := c.DeleteSchedule(ctx, "report/b", false); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSchedule(ctx, "report/broken", false); err != nil {
		t.Fatal(err)
	}
	if st, err = c.Status(ctx); err != nil || st.Schedules.Count != 2 || st.Schedules.Paused != 0 || st.Schedules.Failing != 0 {
		t.Fatalf("after the deletes: %+v, %v: want 2 schedules, none paused or failing", st.Schedules, err)
	}
}

// A run shorter than history.start_after writes its start only with its
// end; while it runs, status shows it running from its execution lease and
// holder record: tick, run id, attempt, replica.
func TestRunWithinStartAfterShowsRunningFromItsLease(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := handlerJobConfig(t, srv.Addr(), "within", "history: {start_after: 5s}", "slow", "@every 1s", "block")
	h := newBlockingHandler()
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("block", h.handle); err != nil {
		t.Fatal(err)
	}
	r := running(t, cfg, baton.WithHandlers(reg))
	defer close(h.release)
	run := recv(t, h.started, "the run to start")
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	recs, err := history.Read(ctx, srv.TestClient(t), cfg.Namespace, "slow", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.RunID == run.RunID && rec.Status == jobs.StatusRunning {
			t.Fatalf("the run's start is in the history before start_after: %+v", rec)
		}
	}
	var got []jobs.RunRecord
	poll.Require(t, 10*time.Second, "status to show the run", func() bool {
		st, err := c.Status(ctx)
		if err != nil {
			t.Log(err)
			return false
		}
		got = st.Jobs[0].Running
		return len(got) == 1
	})
	if g := got[0]; g.RunID != run.RunID || !g.Tick.Equal(run.Tick) || g.Worker != r.ID() || g.Attempt != run.Attempt ||
		g.Started.IsZero() || time.Since(g.Started) > time.Minute {
		t.Errorf("running %+v; want run %s of %s, attempt %d on %s, started a moment ago", g, run.RunID, run.Tick, run.Attempt, r.ID())
	}
}

// A run that ended within history.start_after (one history entry, its
// end) leaves its holder record for up to lock_ttl after its release. When
// the job's lease is then held again before that record is rewritten (the
// ended run's release was lost and its key lives to its ttl; or the next
// run took the lease and its holder write is late or failed), status must
// not show the ended run as running: its history says it ended.
func TestStatusDoesNotShowAnEndedRunAsRunning(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := handlerJobConfig(t, srv.Addr(), "ended", "", "quick", "@every 1h", "quick")
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("quick", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	running(t, cfg, baton.WithHandlers(reg))
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	tk, err := c.Trigger(ctx, "quick", "test")
	if err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "the run to end", func() bool {
		recs, _ := c.History(ctx, "quick", 5)
		return len(recs) > 0 && recs[0].RunID == tk.RunID && recs[0].Status == jobs.StatusOK
	})
	// the lease held again while the ended run's holder record lives
	locks, err := locking.New(srv.TestClient(t), locking.WithPrefix(cfg.Namespace+":lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close() })
	if _, err := locks.TryLock(ctx, "exec:quick", time.Minute); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Jobs[0].Running {
		if r.RunID == tk.RunID {
			t.Fatalf("status shows run %s running; its history says it ended %s (last %+v)", r.RunID, st.Jobs[0].Last.Status, *st.Jobs[0].Last)
		}
	}
}

// A retried run's next attempt within history.start_after has written no
// start yet; its history holds the run's earlier attempt, which ended
// (failed). While the next attempt holds the job's execution lease, status
// must show it running from its holder record: the history's record of the
// run is of another attempt.
func TestStatusShowsARetriedAttemptRunningFromItsLease(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := handlerJobConfig(t, srv.Addr(), "retried", "history: {start_after: 5s}", "flaky", "@every 1h", "flaky")
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	rdb := srv.TestClient(t)
	job, _ := cfg.Job("flaky")
	tick := scheduler.Tick{Job: "flaky", At: time.Now().UTC().Truncate(time.Second), RunID: "0123456789abcdef0123456789abcdef", Replica: "sched-1"}
	// attempt 1 failed within start_after: one entry, its end
	runlog.NewWriter(cfg, rdb, slog.New(slog.DiscardHandler)).Finished(ctx, tick, job, runlog.End{Replica: "w1", Attempt: 1, Fence: 9,
		Status: string(jobs.StatusFailed), Reason: "boom", Took: 40 * time.Millisecond, By: "sched-1"})
	// attempt 2 holds the lease and has written its holder record
	locks, err := locking.New(rdb, locking.WithPrefix(cfg.Namespace+":lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close() })
	if _, err := locks.TryLock(ctx, "exec:flaky", time.Minute); err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"v":1,"id":"flaky@%s","tick":"%s","run_id":"%s","attempt":2,"replica":"w2","started":%d}`,
		tick.At.Format(time.RFC3339), tick.At.Format(time.RFC3339Nano), tick.RunID, time.Now().UnixMilli())
	if err := rdb.Set(ctx, cfg.Namespace+":{exec:flaky}:holder", rec, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	js := st.Jobs[0]
	if len(js.Running) != 1 || js.Running[0].RunID != tick.RunID || js.Running[0].Attempt != 2 || js.Running[0].Worker != "w2" {
		t.Fatalf("running %+v (last %+v); want run %s's attempt 2 on w2, which holds the lease", js.Running, js.Last, tick.RunID)
	}
}

// A replica restarted under its id is one line of baton status: the entry
// of its previous process, no longer live, is left out beside the live
// one; a replica that is gone for good is still listed, not live.
func TestStatusShowsAReplicaRestartedUnderItsIDOnce(t *testing.T) {
	t.Parallel()
	const ns = "restarted"
	rdb, _, c, now := ledgerCluster(t, ns, "@every 1m")
	ctx := context.Background()
	entry := func(seen, started time.Time) string {
		return fmt.Sprintf(`%d {"v":2,"started_ms":%d,"version":"t","role":"run","queues":["default"],"hash":"h"}`, seen.UnixMilli(), started.UnixMilli())
	}
	if err := rdb.HSet(ctx, "{"+ns+":roster}",
		"w1#old", entry(now.Add(-time.Minute), now.Add(-time.Hour)),
		"w1#new", entry(now, now.Add(-50*time.Second)),
		"w2#gone", entry(now.Add(-time.Minute), now.Add(-time.Hour))).Err(); err != nil {
		t.Fatal(err)
	}
	st, _ := c.Status(ctx)
	var lines []string
	for _, r := range st.Replicas {
		lines = append(lines, fmt.Sprintf("%s live=%v", r.ID, r.Live))
	}
	if got := strings.Join(lines, ", "); got != "w1 live=true, w2 live=false" {
		t.Fatalf("replicas: %s, want w1 once (live) and w2 (not live)", got)
	}
}

// A worker runs tasks whether its first heartbeat landed or not. A run it
// began while its heartbeats failed (the roster unwritable for a moment)
// is its own run: once its heartbeats land, baton history and status show
// it running, not unknown as if the worker had started again after it.
func TestHistoryRunBegunWhileItsWorkersHeartbeatsFailedIsRunning(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	const ns = "beatfailed"
	cfg := handlerJobConfig(t, srv.Addr(), ns, "", "slow", "@every 1h", "slow")
	rdb := srv.TestClient(t)
	ctx := context.Background()
	rosterKey := "{" + ns + ":roster}"
	// the roster cannot be written: the replica's heartbeats fail
	if err := rdb.Set(ctx, rosterKey, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("slow", func(ctx context.Context, _ jobs.Run) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	running(t, cfg, baton.WithReplicaID("w1"), baton.WithHandlers(reg))
	t.Cleanup(func() { close(release) }) // before the replica stops
	c := newCluster(t, cfg)
	tk, err := c.Trigger(ctx, "slow", "test")
	if err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "the run to start", func() bool {
		recs, _ := c.History(ctx, "slow", 5)
		return len(recs) > 0 && recs[0].RunID == tk.RunID && recs[0].Status == jobs.StatusRunning
	})
	// the heartbeats land again, and publish when the worker started
	if err := rdb.Del(ctx, rosterKey).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "w1 live in the roster with its start", func() bool {
		v, err := rdb.HGetAll(ctx, rosterKey).Result()
		if err != nil {
			return false
		}
		for _, e := range v {
			if strings.Contains(e, `"started_ms"`) {
				return true
			}
		}
		return false
	})
	recs, err := c.History(ctx, "slow", 5)
	if err != nil || len(recs) == 0 || recs[0].RunID != tk.RunID {
		t.Fatalf("history %+v, %v", recs, err)
	}
	if recs[0].Status != jobs.StatusRunning {
		t.Errorf("history: the run of live worker w1 is %s (%q), want running", recs[0].Status, recs[0].Reason)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if js := st.Jobs[0]; len(js.Running) != 1 || js.Running[0].RunID != tk.RunID {
		t.Errorf("status: running %+v, want run %s of w1", js.Running, tk.RunID)
	}
}

// baton status's last run says what baton history says of it: a run
// recorded running whose worker is gone (here, started again since) is
// unknown, with why, not running beside a RUNNING column that leaves it
// out.
func TestStatusLastRunWhoseWorkerIsGoneIsUnknown(t *testing.T) {
	t.Parallel()
	const ns = "lastgone"
	rdb, _, c, now := ledgerCluster(t, ns, "@every 1m")
	ctx := context.Background()
	tick := now.Truncate(time.Minute).Add(-time.Minute)
	writeHistory(t, rdb, ns, "r", []historyEvent{{tick.Add(100 * time.Millisecond), []any{"ev", "started", "tick", tick.Format(time.RFC3339Nano),
		"run", "run-w7", "replica", "w7", "attempt", 1, "fence", 7, "by", "s1"}}})
	// w7 started again after the run began; its previous process is dead
	entry := func(seen, started time.Time) string {
		return fmt.Sprintf(`%d {"v":2,"started_ms":%d,"version":"t","role":"run","queues":["default"],"hash":"h"}`, seen.UnixMilli(), started.UnixMilli())
	}
	if err := rdb.HSet(ctx, "{"+ns+":roster}", "w7#new", entry(now, tick.Add(30*time.Second)), "w7#old", entry(now.Add(-time.Minute), tick.Add(-time.Hour))).Err(); err != nil {
		t.Fatal(err)
	}
	recs, err := c.History(ctx, "r", 1)
	if err != nil || len(recs) != 1 || recs[0].Status != jobs.StatusUnknown {
		t.Fatalf("history %+v, %v: want the run unknown", recs, err)
	}
	st, _ := c.Status(ctx)
	js := st.Jobs[0]
	if js.Name != "r" || js.Last == nil || len(js.Running) != 0 {
		t.Fatalf("status of r: %+v", js)
	}
	if js.Last.Status != recs[0].Status || js.Last.Reason != recs[0].Reason {
		t.Errorf("status: the last run is %s (%q); history says %s (%q)", js.Last.Status, js.Last.Reason, recs[0].Status, recs[0].Reason)
	}
}

// A run recorded running past its job's timeout (and a minute) has no end
// to come, whether its worker lives or not (the worker's write of its end
// was lost): baton history says what the ledger says of it, unknown with
// why, not running until newer runs trim it.
func TestHistoryRunPastItsTimeoutIsUnknownAsTheLedgerSays(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	const ns = "pasttimeout"
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: %s
jobs:
  - name: r
    schedule: "@every 1m"
    timeout: 1m
    exec: {command: ["true"]}
`, srv.Addr(), ns))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, cfg)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	tick := now.UTC().Truncate(time.Minute).Add(-10 * time.Minute)
	writeHistory(t, rdb, ns, "r", []historyEvent{{tick.Add(100 * time.Millisecond), []any{"ev", "started", "tick", tick.Format(time.RFC3339Nano),
		"run", "run-1", "replica", "w1", "attempt", 1, "fence", 7, "by", "s1"}}})
	// w1 lives, and began before the run
	if err := rdb.HSet(ctx, "{"+ns+":roster}", "w1#a", fmt.Sprintf(`%d {"v":2,"started_ms":%d,"version":"t","role":"run","queues":["default"],"hash":"h"}`,
		now.UnixMilli(), tick.Add(-time.Hour).UnixMilli())).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.Ticks(ctx, "r", tick, tick)
	if err != nil || len(l.Ticks) != 1 || l.Ticks[0].Outcome != baton.OutcomeUnknown {
		t.Fatalf("ledger %+v, %v: want the run unknown", l, err)
	}
	recs, err := c.History(ctx, "r", 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("history %+v, %v", recs, err)
	}
	if recs[0].Status != jobs.StatusUnknown || recs[0].Reason != l.Ticks[0].Reason {
		t.Errorf("history: the run is %s (%q); the ledger says %s (%q)", recs[0].Status, recs[0].Reason, l.Ticks[0].Outcome, l.Ticks[0].Reason)
	}
}
