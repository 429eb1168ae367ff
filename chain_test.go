package baton_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	t.Parallel() // its own Redis and replicas
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

// chainLog records the runs of a chain's Go handlers: each tick's end (ok
// or failed) of the parent, each start of the child, with when.
type chainLog struct {
	mu      sync.Mutex
	ended   map[string]string // parent tick -> ok | failed
	endedAt map[string]time.Time
	runs    map[string][]time.Time // child tick -> its starts
}

// Runtime schedules chain to a runtime schedule and to a job of the list
// across replicas as the list's jobs do: the child runs once per parent
// tick that succeeded, after it ended, and is skipped naming the parent's
// failure otherwise.
func TestARuntimeChainRunsOnceAfterEachParentTickAcrossReplicas(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: rtchain
worker: {shutdown_grace: 2s}
schedules: {history: 200}
jobs:
  - {name: listed, schedule: "@every 1s", concurrency: allow, handler: {name: ok}}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := openCluster(t, cfg)
	l := &chainLog{ended: map[string]string{}, endedAt: map[string]time.Time{}, runs: map[string][]time.Time{}}
	mirrored := map[string]int{}
	reg := jobs.NewRegistry()
	reg.Register("ok", jobs.HandlerFunc(func(context.Context, jobs.Run) error { return nil }))
	reg.Register("extract", jobs.HandlerFunc(func(_ context.Context, run jobs.Run) error {
		time.Sleep(200 * time.Millisecond) // a run that takes a while
		tick := run.Tick.UTC().Format(time.RFC3339)
		l.mu.Lock()
		defer l.mu.Unlock()
		l.endedAt[tick] = time.Now()
		if run.Tick.Second()%3 == 0 {
			l.ended[tick] = "failed"
			return errors.New("extract failed")
		}
		l.ended[tick] = "ok"
		return nil
	}))
	reg.Register("load", jobs.HandlerFunc(func(_ context.Context, run jobs.Run) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if run.Job == "@mirror" {
			mirrored[run.Tick.UTC().Format(time.RFC3339)]++
			return nil
		}
		tick := run.Tick.UTC().Format(time.RFC3339)
		l.runs[tick] = append(l.runs[tick], time.Now())
		return nil
	}))
	for i := 1; i <= 3; i++ {
		running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID(fmt.Sprintf("rtchain-%d", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	retry := 0
	if _, err := c.PutScheduleDocument(ctx, "extract", []byte(`{schedule: "@every 1s", concurrency: allow, max_retry: 0, handler: {name: extract}}`)); err != nil {
		t.Fatal(err)
	}
	for id, parent := range map[string]string{"load": "@extract", "mirror": "listed"} {
		spec := baton.ScheduleSpec{After: []string{parent}, Handler: "load", StartingDeadline: 20 * time.Second, Concurrency: config.ConcurrencyAllow, MaxRetry: &retry}
		if _, err := c.PutSchedule(ctx, id, spec); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
	}
	poll.Require(t, 30*time.Second, "six extract ticks ended, mirror ran", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.ended) >= 6 && len(mirrored) >= 3
	})
	l.mu.Lock()
	ended := maps.Clone(l.ended)
	l.mu.Unlock()
	var recs []jobs.RunRecord
	if !poll.Until(30*time.Second, func() bool {
		recs, _ = c.History(ctx, "@load", 0)
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
	}) {
		t.Fatalf("@load's ticks of the @extract ticks ended were not decided in 30s: history %+v; ended %v", recs, ended)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for tick, how := range ended {
		switch runs := l.runs[tick]; {
		case how == "ok" && len(runs) != 1:
			t.Errorf("@extract@%s succeeded; @load ran it %d times", tick, len(runs))
		case how == "ok" && runs[0].Before(l.endedAt[tick]):
			t.Errorf("@load@%s started before @extract's run of it ended", tick)
		case how == "failed" && len(runs) != 0:
			t.Errorf("@extract@%s failed; @load ran it %d times", tick, len(runs))
		}
	}
	for _, r := range recs {
		tick := r.Tick.UTC().Format(time.RFC3339)
		if ended[tick] == "failed" && (r.Status != jobs.StatusSkipped || !strings.HasPrefix(r.Reason, "@extract@"+tick+" failed")) {
			t.Errorf("@load@%s, whose @extract failed, recorded %s %q", tick, r.Status, r.Reason)
		}
	}
	for tick, n := range mirrored {
		if n != 1 {
			t.Errorf("@mirror ran %s %d times", tick, n)
		}
	}
}

// A runtime schedule may run after a parent and that parent's own parent
// (summary after extract and transform, transform after extract), and
// another after it (publish after summary): the put's check finds every
// ancestor, the shared one being no cycle.
func TestARuntimeScheduleAfterOneWhoseParentsShareAnAncestorCanBePut(t *testing.T) {
	t.Parallel() // its own Redis
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, "redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: rtdiamond\n", srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := openCluster(t, cfg)
	ctx := context.Background()
	for _, p := range []struct{ id, doc string }{
		{"extract", `{schedule: "@hourly", handler: {name: h}}`},
		{"transform", `{after: ["@extract"], handler: {name: h}}`},
		{"summary", `{after: ["@extract", "@transform"], handler: {name: h}}`},
		{"publish", `{after: ["@summary"], handler: {name: h}}`},
	} {
		if _, err := c.PutScheduleDocument(ctx, p.id, []byte(p.doc)); err != nil {
			t.Fatalf("put %s: %v", p.id, err)
		}
	}
}

// A queue Redis that loses a runtime chain (restarted without persistence:
// flushed here) gets it back from the replica, the child put back before
// its parent (ids in order: "a-load" before "b-extract"), and the chain
// runs as before: for each parent tick after the store was put back, the
// child runs once, after the parent's run ended, and neither stays
// refused.
func TestARuntimeChainPutBackAfterTheQueueRedisLostItRunsAfterItsParentAgain(t *testing.T) {
	t.Parallel() // its own Redis and replica
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "schedules: {history: 200}")
	c := openCluster(t, cfg)
	l := &chainLog{ended: map[string]string{}, endedAt: map[string]time.Time{}, runs: map[string][]time.Time{}}
	reg := jobs.NewRegistry()
	reg.Register("extract", jobs.HandlerFunc(func(_ context.Context, run jobs.Run) error {
		time.Sleep(100 * time.Millisecond) // a run that takes a while
		l.mu.Lock()
		defer l.mu.Unlock()
		tick := run.Tick.UTC().Format(time.RFC3339)
		l.endedAt[tick], l.ended[tick] = time.Now(), "ok"
		return nil
	}))
	reg.Register("load", jobs.HandlerFunc(func(_ context.Context, run jobs.Run) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		tick := run.Tick.UTC().Format(time.RFC3339)
		l.runs[tick] = append(l.runs[tick], time.Now())
		return nil
	}))
	r := running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r1"))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	retry := 0
	if _, err := c.PutScheduleDocument(ctx, "b-extract", []byte(`{schedule: "@every 1s", concurrency: allow, max_retry: 0, handler: {name: extract}}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutSchedule(ctx, "a-load", baton.ScheduleSpec{After: []string{"@b-extract"}, Handler: "load", StartingDeadline: 20 * time.Second,
		Concurrency: config.ConcurrencyAllow, MaxRetry: &retry}); err != nil {
		t.Fatal(err)
	}
	ranOnce := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.runs) >= 2
	}
	poll.Require(t, 30*time.Second, "the chain to run", ranOnce)
	if err := srv.TestClient(t).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 30*time.Second, "both put back", func() bool {
		st, err := c.Status(ctx)
		return err == nil && st.Schedules != nil && st.Schedules.Count == 2 && st.Schedules.WentBack != nil && r.Schedules() == 2
	})
	back := time.Now().Add(time.Second) // ticks from here on were claimed after the restore
	after := func() []string {
		l.mu.Lock()
		defer l.mu.Unlock()
		var ticks []string
		for tick := range l.ended {
			if at, _ := time.Parse(time.RFC3339, tick); at.After(back) && l.endedAt[tick].Before(time.Now().Add(-5*time.Second)) {
				ticks = append(ticks, tick) // ended 5 s ago: its child is decided
			}
		}
		return ticks
	}
	poll.Require(t, 40*time.Second, "three parent ticks after the restore ended a while ago", func() bool { return len(after()) >= 3 })
	ticks := after()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tick := range ticks {
		if runs := l.runs[tick]; len(runs) != 1 || runs[0].Before(l.endedAt[tick]) {
			t.Errorf("@b-extract@%s ended at %v; @a-load ran it at %v, want once after", tick, l.endedAt[tick], runs)
		}
	}
	if st, err := c.Status(ctx); err != nil || st.Schedules.Refused != 0 {
		t.Errorf("refused after the restore: %+v %v", st.Schedules, err)
	}
}
