package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redact"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/replicatest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
)

// A replica records its runs; baton history prints them, newest first, as
// a table and as JSON, with a failed run's reason and output tail.
func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: htest
jobs:
  - name: flaky
    schedule: "@every 1s"
    max_retry: 0
    exec: {command: ["sh", "-c", "echo out-$BATON_RUN_ID; exit 7"]}
`, srv.Addr()))
	p := start(t, nil, "run", "--config", cfg, "--http", "")
	var recs []jobs.RunRecord
	poll.Require(t, 20*time.Second, "two finished runs in baton history --json", func() bool {
		code, out, _ := runIn("history", "--config", cfg, "--json", "flaky")
		recs = nil
		if code != 0 || json.Unmarshal([]byte(out), &recs) != nil {
			return false
		}
		done := 0
		for _, r := range recs {
			if r.Status == jobs.StatusFailed {
				done++
			}
		}
		return done >= 2
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Errorf("baton run exited %d after SIGTERM; stderr:\n%s", code, p.stderr.String())
	}
	for _, r := range recs {
		if r.Status != jobs.StatusFailed {
			continue
		}
		if r.ExitCode == nil || *r.ExitCode != 7 || r.Worker == "" || r.Dispatcher == "" || r.Fence <= 0 ||
			!strings.Contains(r.Output, "out-"+r.RunID) || !strings.Contains(r.Reason, "exit") {
			t.Errorf("failed run record: %+v", r)
		}
	}
	for i := 1; i < len(recs); i++ {
		if recs[i].Tick.After(recs[i-1].Tick) {
			t.Errorf("not newest first: %v before %v", recs[i-1].Tick, recs[i].Tick)
		}
	}
	code, out, errs := runIn("history", "--config", cfg, "-n", "1", "flaky")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "TICK") {
		t.Errorf("history -n 1: %d %q %q", code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "--config", cfg}, "name a job"},
		{[]string{"history", "--config", cfg, "nope"}, `no job "nope"`},
		{[]string{"history", "--config", cfg, "-n", "-1", "flaky"}, "-n must be >= 0"},
	} {
		if code, _, errs := runIn(tc.args...); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: %d %q, want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
}

// baton status shows each job's next tick, last run, runs under way, lock
// and pause, and each replica with its skew; baton locks lists the
// execution lease a running job holds.
func TestStatusAndLocksCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: stest
jobs:
  - name: slow
    schedule: "@every 1s"
    exec: {command: ["sleep", "3"]}
  - name: idle
    schedule: "0 3 * * *"
    timezone: Europe/Berlin
    exec: {command: ["true"]}
`, srv.Addr()))
	if code, _, errs := runIn("pause", "--config", cfg, "idle"); code != 0 {
		t.Fatalf("pause: %s", errs)
	}
	p := start(t, []string{"BATON_ID=status-1"}, "run", "--config", cfg, "--http", "")
	var st baton.Status
	poll.Require(t, 20*time.Second, "status --json with slow running and holding its lease", func() bool {
		code, out, _ := runIn("status", "--config", cfg, "--json")
		st = baton.Status{}
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Jobs) != 2 {
			return false
		}
		s := st.Jobs[0]
		return s.Last != nil && len(s.Running) == 1 && s.Lock != nil && len(st.Replicas) == 1
	})
	slow, idle := st.Jobs[0], st.Jobs[1]
	if slow.Name != "slow" || slow.Paused || slow.Next.IsZero() || slow.Running[0].Worker != "status-1" || slow.Lock.Fence <= 0 {
		t.Errorf("slow: %+v", slow)
	}
	if !idle.Paused || idle.PausedBy != osUser() || idle.PausedSince.IsZero() || idle.Timezone != "Europe/Berlin" || idle.Next.Hour() != 1 && idle.Next.Hour() != 2 {
		t.Errorf("idle: %+v (next %v: 03:00 in Berlin)", idle, idle.Next)
	}
	if r := st.Replicas[0]; r.ID != "status-1" || !r.Live || r.Differs || r.Skew > time.Second || r.Skew < -time.Second {
		t.Errorf("replica: %+v", r)
	}
	code, out, errs := runIn("status", "--config", cfg)
	for _, want := range []string{"JOB", "slow", "yes (" + redact.Escape(osUser()) + ")", "idle paused by " + redact.Quote(osUser()) + " since ", "on status-1", "SKEW", "held, fence"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status table lacks %q: %d\n%s%s", want, code, out, errs)
		}
	}
	var held []locking.HeldLock
	poll.Require(t, 10*time.Second, "baton locks --json listing exec:slow", func() bool {
		code, out, _ := runIn("locks", "--config", cfg, "--json")
		held = nil
		if code != 0 || json.Unmarshal([]byte(out), &held) != nil {
			return false
		}
		for _, h := range held {
			if h.Name == "exec:slow" && h.Masters == 1 && h.TTL > 0 {
				return true
			}
		}
		return false
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 20*time.Second)
}

// baton trigger runs a job once now through the queue, with its own run id,
// recorded as manual; twice runs twice (the job allows overlaps: under
// forbid the second would be skipped while the first runs); a local job is
// refused.
func TestTriggerCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	out := t.TempDir() + "/runs"
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: ttest
jobs:
  - name: report
    schedule: "0 0 1 1 *"
    concurrency: allow
    exec: {command: ["sh", "-c", "echo $BATON_RUN_ID >> %s"]}
  - name: tidy
    schedule: "0 0 1 1 *"
    mode: local
    exec: {command: ["true"]}
`, srv.Addr(), out))
	p := start(t, nil, "worker", "--config", cfg, "--http", "")
	var ids, ticks []string
	for range 2 {
		code, stdout, errs := runIn("trigger", "--config", cfg, "--by", "ops@test", "report")
		if code != 0 || !strings.HasPrefix(stdout, "report triggered: run ") || !strings.Contains(stdout, `by "ops@test"`) {
			t.Fatalf("trigger: %d %q %q", code, stdout, errs)
		}
		ids = append(ids, strings.TrimSuffix(strings.Fields(stdout)[3], ","))
		ticks = append(ticks, strings.TrimSuffix(strings.Fields(stdout)[5], ","))
	}
	var recs []jobs.RunRecord
	poll.Require(t, 20*time.Second, "both manual runs done", func() bool {
		code, stdout, _ := runIn("history", "--config", cfg, "--json", "report")
		recs = nil
		if code != 0 || json.Unmarshal([]byte(stdout), &recs) != nil || len(recs) != 2 {
			return false
		}
		return recs[0].Status == jobs.StatusOK && recs[1].Status == jobs.StatusOK
	})
	for _, r := range recs {
		if !r.Manual || r.Dispatcher != "ops@test" || (r.RunID != ids[0] && r.RunID != ids[1]) {
			t.Errorf("manual run record: %+v", r)
		}
		// the tick printed is the run's, to the millisecond
		if tick := r.Tick.UTC().Format(triggerTickFormat); tick != ticks[0] && tick != ticks[1] {
			t.Errorf("run %s's tick %s is not one printed: %v", r.RunID, tick, ticks)
		}
	}
	if got := waitFile(t, out, 5*time.Second); strings.Count(got, "\n") != 2 {
		t.Errorf("the job ran %q, want both runs", got)
	}
	for _, tc := range []struct {
		job, want string
	}{{"tidy", "local job"}, {"nope", `no job "nope"`}} {
		if code, _, errs := runIn("trigger", "--config", cfg, tc.job); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("trigger %s: %d %q, want exit 2 and %q", tc.job, code, errs, tc.want)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 20*time.Second)
}

// pausedTicks waits until job's history (read with baton history) holds
// at least n paused ticks, and returns them, newest first.
func pausedTicks(t *testing.T, cfg, job string, n int) []jobs.RunRecord {
	t.Helper()
	var paused []jobs.RunRecord
	poll.Require(t, 20*time.Second, fmt.Sprintf("%d paused ticks of %s in the history", n, job), func() bool {
		code, stdout, _ := runIn("history", "--config", cfg, "--json", job)
		paused = nil
		var recs []jobs.RunRecord
		if code != 0 || json.Unmarshal([]byte(stdout), &recs) != nil {
			return false
		}
		for _, r := range recs {
			if r.Status == jobs.StatusPaused {
				paused = append(paused, r)
			}
		}
		return len(paused) >= n
	})
	return paused
}

// baton backfill runs the ticks of a window that never ran (here: paused),
// each exactly once, also with three backfills racing; a dry run lists
// them first; a second backfill finds nothing to do.
func TestBackfillCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	out := t.TempDir() + "/ticks"
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: bftest
jobs:
  - name: b
    schedule: "@every 1s"
    concurrency: allow
    exec: {command: ["sh", "-c", "echo $BATON_TICK >> %s"]}
  - name: f
    schedule: "@every 1s"
    exec: {command: ["true"]}
  - name: tidy
    schedule: "@every 1s"
    mode: local
    exec: {command: ["true"]}
`, srv.Addr(), out))
	if code, _, errs := runIn("pause", "--config", cfg, "b", "f"); code != 0 {
		t.Fatal(errs)
	}
	p := start(t, nil, "run", "--config", cfg, "--http", "")
	paused := pausedTicks(t, cfg, "b", 4)
	from, to := paused[len(paused)-1].Tick, paused[0].Tick // newest first
	window := []string{"--config", cfg, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "b"}
	code, stdout, errs := runIn(append([]string{"backfill", "--dry-run"}, window...)...)
	if code != 0 || !strings.Contains(stdout, fmt.Sprintf("%d ticks in the window never ran", len(paused))) {
		t.Fatalf("dry run: %d %q %q", code, stdout, errs)
	}
	var racers []*proc
	for range 3 {
		racers = append(racers, start(t, nil, append([]string{"backfill"}, window...)...))
	}
	for _, r := range racers {
		if code := r.wait(t, 60*time.Second); code != 0 {
			t.Errorf("a racing backfill exited %d: %s", code, r.stderr.String())
		}
	}
	poll.Require(t, 20*time.Second, "every backfilled tick run", func() bool {
		data, _ := os.ReadFile(out)
		return strings.Count(string(data), "\n") >= len(paused)
	})
	data, _ := os.ReadFile(out)
	seen := map[string]int{}
	for _, l := range strings.Fields(string(data)) {
		seen[l]++
	}
	for _, r := range paused {
		if n := seen[r.Tick.Format(time.RFC3339)]; n != 1 {
			t.Errorf("tick %s ran %d times", r.Tick.Format(time.RFC3339), n)
		}
	}
	if len(seen) != len(paused) {
		t.Errorf("ran %d ticks, want the %d paused ones: %v", len(seen), len(paused), seen)
	}
	if code, stdout, errs := runIn(append([]string{"backfill"}, window...)...); code != 0 || !strings.Contains(stdout, "nothing to backfill") {
		t.Errorf("second backfill: %d %q %q", code, stdout, errs)
	}
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backfill", "--config", cfg, "--from", to.Format(time.RFC3339), "--to", from.Format(time.RFC3339), "b"}, "before it starts"},
		{[]string{"backfill", "--config", cfg, "--from", from.Format(time.RFC3339), "--to", future, "b"}, "ends in the future"},
		{[]string{"backfill", "--config", cfg, "--from", "2020-01-01T00:00:00Z", "--to", to.Format(time.RFC3339), "b"}, "more than 10000 ticks"},
		{[]string{"backfill", "--config", cfg, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "tidy"}, "local job"},
		{[]string{"backfill", "--config", cfg, "--from", "yesterday", "--to", to.Format(time.RFC3339), "b"}, "RFC 3339"},
		// forbid: dispatched together, all but one would be skipped
		{[]string{"backfill", "--config", cfg, "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339), "f"}, "concurrency forbid"},
	} {
		if code, _, errs := runIn(tc.args...); code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: %d %q, want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 20*time.Second)
}

// baton backfill --chain lists and dispatches a chain's links in order,
// the links after the first waiting for their parents until a time it
// prints; a link that cannot be backfilled (concurrency forbid over
// several ticks) refuses the whole chain before anything is dispatched.
func TestBackfillChainCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%[1]s/0
locking:
  fresh_deployment: true
namespace: bfchaincli
jobs:
  - name: extract
    schedule: "@every 1s"
    concurrency: allow
    exec: {command: ["sh", "-c", "echo $BATON_TICK >> %[2]s/extract"]}
  - name: load
    after: [extract]
    concurrency: allow
    exec: {command: ["sh", "-c", "echo $BATON_TICK >> %[2]s/load"]}
  - name: a
    schedule: "@every 1s"
    concurrency: allow
    exec: {command: ["true"]}
  - name: b
    after: [a]
    exec: {command: ["true"]}
`, srv.Addr(), dir))
	if code, _, errs := runIn("pause", "--config", cfg, "extract", "load", "a", "b"); code != 0 {
		t.Fatal(errs)
	}
	p := start(t, nil, "run", "--config", cfg, "--http", "")
	paused := pausedTicks(t, cfg, "load", 3)
	from, to := paused[len(paused)-1].Tick.Format(time.RFC3339), paused[0].Tick.Format(time.RFC3339)
	if code, _, errs := runIn("backfill", "--config", cfg, "--chain", "--from", from, "--to", to, "a"); code != 2 || !strings.Contains(errs, "b has concurrency forbid") {
		t.Errorf("a chain with a forbid link over several ticks: %d %q, want exit 2 naming b", code, errs)
	}
	if ids := replicatest.PendingTasks(t, srv.TestClient(t), "bfchaincli:default"); len(ids) > 0 {
		t.Errorf("a refused chain dispatched %v", ids)
	}
	window := []string{"--config", cfg, "--chain", "--from", from, "--to", to, "extract"}
	code, stdout, errs := runIn(append([]string{"backfill", "--dry-run", "--json"}, window...)...)
	var plans []baton.BackfillPlan
	if code != 0 || json.Unmarshal([]byte(stdout), &plans) != nil || len(plans) != 2 || plans[0].Job != "extract" || plans[1].Job != "load" {
		t.Fatalf("dry run: %d %q %q", code, stdout, errs)
	}
	if len(plans[1].Ticks) != len(paused) || plans[1].AwaitUntil.IsZero() || !plans[0].AwaitUntil.IsZero() {
		t.Errorf("dry run's plans: %+v, want load's %d ticks waiting, extract's not", plans, len(paused))
	}
	code, stdout, errs = runIn(append([]string{"backfill"}, window...)...)
	if code != 0 || !strings.Contains(stdout, "extract: dispatched") || !strings.Contains(stdout, "load: dispatched") || !strings.Contains(stdout, "each waits for its parents' tick until") {
		t.Fatalf("backfill --chain: %d %q %q", code, stdout, errs)
	}
	poll.Require(t, 30*time.Second, "load ran every backfilled tick", func() bool {
		data, _ := os.ReadFile(filepath.Join(dir, "load"))
		return strings.Count(string(data), "\n") >= len(paused)
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 20*time.Second)
}

// Under concurrency: replace, a trigger stops the run of an earlier trigger
// of the same second (triggers carry milliseconds, so the second is newer).
func TestTriggerReplacesAnEarlierTriggerOfTheSameSecond(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: trep
worker: {shutdown_grace: 2s}
jobs:
  - name: slow
    schedule: "0 0 1 1 *"
    concurrency: replace
    lock_ttl: 2s
    exec: {command: ["sleep", "30"]}
`, srv.Addr()))
	p := start(t, nil, "worker", "--config", cfg, "--http", "")
	// two triggers within one second of Redis's clock: one baton trigger
	// naming the job twice sends them one round trip apart. Its lines say
	// "slow triggered: run ID, tick T, by X", the tick to the millisecond
	var first, second string
	poll.Require(t, 20*time.Second, "two triggers within one second", func() bool {
		code, out, errs := runIn("trigger", "--config", cfg, "slow", "slow")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 {
			t.Logf("baton trigger slow slow: exit %d\n%s%s", code, out, errs)
			return false
		}
		f1, f2 := strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(f1) < 6 || len(f2) < 6 || len(f1[5]) < 19 || len(f2[5]) < 19 {
			t.Fatalf("unexpected trigger output %q", out)
		}
		if f1[5][:19] != f2[5][:19] { // another second: try again
			return false
		}
		first, second = strings.TrimSuffix(f1[3], ","), strings.TrimSuffix(f2[3], ",")
		return true
	})
	var recs []jobs.RunRecord
	if !poll.Until(20*time.Second, func() bool {
		code, stdout, _ := runIn("history", "--config", cfg, "--json", "slow")
		recs = nil
		if code != 0 || json.Unmarshal([]byte(stdout), &recs) != nil {
			return false
		}
		var replaced, running bool
		for _, r := range recs {
			// the first gives way to the second: stopped (replaced), or, when
			// the worker fetched the second's task first, never started
			// (skipped: a newer tick holds the job), never beside it
			replaced = replaced || r.RunID == first && (r.Status == jobs.StatusReplaced ||
				r.Status == jobs.StatusSkipped && strings.Contains(r.Reason, second))
			running = running || r.RunID == second && r.Status == jobs.StatusRunning
		}
		return replaced && running
	}) {
		t.Fatalf("the first trigger (%s) was not replaced by the second (%s): %+v\nthe worker's log:\n%s", first, second, recs, p.stderr.String())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 30*time.Second)
}

// baton lock --max 2: two commands hold the key at once, the third is busy;
// when one ends, a waiting third gets its slot.
func TestLockMaxIsASemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	url := redisURL(srv)
	dir := t.TempDir()
	var holders []*proc
	for i := range 2 {
		ready := fmt.Sprintf("%s/ready%d", dir, i)
		holders = append(holders, start(t, []string{"READY=" + ready}, "lock", "--redis", url, "--max", "2", "exports", "--",
			"sh", "-c", `echo "$BATON_FENCING_TOKEN" > "$READY"; exec sleep 30`))
		holders[i].awaitFile(t, ready)
	}
	code, stderr := runBaton(t, 10*time.Second, nil, "lock", "--redis", url, "--max", "2", "exports", "--", "true")
	if code != exitBusy {
		t.Fatalf("a third holder: exit %d, want busy (%d); stderr:\n%s", code, exitBusy, stderr)
	}
	ran := dir + "/third"
	third := start(t, []string{"RAN=" + ran}, "lock", "--redis", url, "--max", "2", "--wait", "20s", "exports", "--", "sh", "-c", `touch "$RAN"`)
	holders[0].stop(t)
	if code := third.wait(t, 20*time.Second); code != 0 {
		t.Errorf("the waiting third: exit %d; stderr:\n%s", code, third.stderr.String())
	}
	if _, err := os.Stat(ran); err != nil {
		t.Error("the waiting third did not run")
	}
	holders[1].stop(t)
	if code, stderr := runBaton(t, 10*time.Second, nil, "lock", "--redis", url, "--max", "0", "exports", "--", "true"); code != 2 || !strings.Contains(stderr, "--max 0 must be at least 1") {
		t.Errorf("--max 0: exit %d, %q", code, stderr)
	}
}

// --shared holders run together; an --exclusive one is refused while they
// hold, waits (with --wait) until they are gone, and keeps a new --shared
// one out while it waits; flags that do not go together are usage errors.
func TestLockSharedAndExclusive(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	url := redisURL(srv)
	dir := t.TempDir()
	var readers []*proc
	for i := range 2 {
		ready := fmt.Sprintf("%s/ready%d", dir, i)
		readers = append(readers, start(t, []string{"READY=" + ready}, "lock", "--redis", url, "--shared", "catalog", "--",
			"sh", "-c", `echo "$BATON_FENCING_TOKEN" > "$READY"; exec sleep 30`))
		readers[i].awaitFile(t, ready)
	}
	if code, stderr := runBaton(t, 10*time.Second, nil, "lock", "--redis", url, "--exclusive", "catalog", "--", "true"); code != exitBusy {
		t.Fatalf("--exclusive beside two --shared: exit %d, want busy (%d); stderr:\n%s", code, exitBusy, stderr)
	}
	wrote := dir + "/wrote"
	writer := start(t, []string{"WROTE=" + wrote}, "lock", "--redis", url, "--exclusive", "--wait", "20s", "catalog", "--", "sh", "-c", `touch "$WROTE"`)
	rdb := srv.TestClient(t)
	poll.Require(t, 10*time.Second, "the waiting writer's intent", func() bool {
		return rdb.ZCard(context.Background(), "baton:lock:{rw:catalog}:wi").Val() == 1
	})
	if code, stderr := runBaton(t, 10*time.Second, nil, "lock", "--redis", url, "--shared", "catalog", "--", "true"); code != exitBusy {
		t.Fatalf("a new --shared while --exclusive waits: exit %d, want busy (%d); stderr:\n%s", code, exitBusy, stderr)
	}
	if _, err := os.Stat(wrote); err == nil {
		t.Fatal("the --exclusive command ran beside --shared ones")
	}
	for _, r := range readers {
		r.stop(t)
	}
	if code := writer.wait(t, 20*time.Second); code != 0 {
		t.Errorf("the waiting --exclusive: exit %d; stderr:\n%s", code, writer.stderr.String())
	}
	if _, err := os.Stat(wrote); err != nil {
		t.Error("the waiting --exclusive command did not run")
	}
	for _, bad := range [][]string{{"--shared", "--exclusive"}, {"--shared", "--max", "2"}, {"--exclusive", "--fair"}} {
		args := append(append([]string{"lock", "--redis", url}, bad...), "k", "--", "true")
		if code, stderr := runBaton(t, 10*time.Second, nil, args...); code != 2 || !strings.Contains(stderr, "do") {
			t.Errorf("%v: exit %d, %q", bad, code, stderr)
		}
	}
	if code, stderr := runBaton(t, 10*time.Second, nil, "lock", "--redis", url, "--fair", "--max", "2", "k", "--", "true"); code != 0 {
		t.Errorf("--fair --max 2 (a fair semaphore): exit %d, %q", code, stderr)
	}
}

// The WHY cell of a failed run says its reason and the last line of its
// output tail, escaped, on the row; a record without output its reason.
func TestHistoryWhyShowsReasonAndLastOutputLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		r    jobs.RunRecord
		want string
	}{
		{jobs.RunRecord{Reason: `non-zero exit: "sh" exited with code 3`, Output: "connecting\nERROR: vendor down\n\n"},
			`"non-zero exit: \"sh\" exited with code 3", output: "ERROR: vendor down"`},
		{jobs.RunRecord{Reason: "past its starting deadline"}, `"past its starting deadline"`},
		{jobs.RunRecord{}, "-"},
		{jobs.RunRecord{Reason: "failed", Output: "\x1b[2J\x1b]0;owned\x07 cleared\n"}, `"failed", output: "\x1b[2J\x1b]0;owned\a cleared"`},
	} {
		if got := why(tc.r); got != tc.want {
			t.Errorf("why(%q, %q)\n got %s\nwant %s", tc.r.Reason, tc.r.Output, got, tc.want)
		}
	}
}

// forged is a status and a reason a Redis writer puts in a history entry:
// a terminal that ran its escapes would erase the line and print " ok"
// over a failed run, and a newline or tab would forge a row or a column.
const forged = "\x1b[2K\x1b[1G ok"

// forgeHistory writes a finished run of job, tick at, into the history
// stream of namespace ns on the real Redis, as a Redis writer could: with
// status and reason as given.
func forgeHistory(t *testing.T, srv *redistest.Server, ns, job string, at time.Time, run, status, reason string) {
	t.Helper()
	err := srv.TestClient(t).XAdd(context.Background(), &redis.XAddArgs{
		Stream: ns + ":{history:" + job + "}",
		Values: []any{"ev", "finished", "tick", at.UTC().Format(time.RFC3339Nano), "run", run, "replica", "r1",
			"status", status, "attempt", "1", "reason", reason, "output", "step\n" + forged + "\n"},
	}).Err()
	if err != nil {
		t.Fatal(err)
	}
}

// baton history prints a history entry's status and reason, forged with
// terminal escapes, tabs and newlines by a Redis writer, escaped: the raw
// bytes never reach the terminal, and the entry stays one row of as many
// cells as the header.
func TestHistoryPrintsRedisTextInert(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
namespace: inert
jobs:
  - name: report
    schedule: "@hourly"
    exec: {command: ["true"]}
`, srv.Addr()))
	tick := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	forgeHistory(t, srv, "inert", "report", tick, "run-1", forged, forged+"\t2026-11-28T09:00:00Z\tok\nnext row")
	code, out, errs := runIn("history", "--config", cfg, "report")
	if code != 0 {
		t.Fatalf("history: exit %d\n%s%s", code, out, errs)
	}
	if strings.ContainsAny(out, "\x1b\t") {
		t.Errorf("history printed raw control characters:\n%q", out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("history printed %d lines for one entry, want the header and one row:\n%s", len(lines), out)
	}
	if !strings.Contains(lines[1], `2026-11-28T10:00:00Z  \x1b[2K\x1b[1G ok  run-1`) {
		t.Errorf("the row does not show the forged status escaped in its cell:\n%s", out)
	}
	// the WHY cell keeps the reason's first line
	if !strings.Contains(lines[1], `"\x1b[2K\x1b[1G ok\t2026-11-28T09:00:00Z\tok", output: "\x1b[2K\x1b[1G ok"`) {
		t.Errorf("the row does not show the forged reason and output escaped:\n%s", out)
	}
}

// A job name that is a runtime schedule's id without its "@", or near a
// job of the list, is refused with what was meant; a deleted runtime
// schedule's history and ticks stay readable.
func TestHistorySaysWhichJobWasMeant(t *testing.T) {
	t.Parallel()
	cfg := schedulesConfigFile(t, redistest.New(t))
	if code, out, errs := runIn("schedules", "put", "--config", cfg, "report/tenant-3", "--schedule", "@hourly", "--handler", "report"); code != 0 {
		t.Fatalf("put: %d %q %q", code, out, errs)
	}
	if code, _, errs := runIn("history", "--config", cfg, "report/tenant-3"); code != 2 || !strings.Contains(errs, "did you mean @report/tenant-3") {
		t.Fatalf("history of an id without its @: %d %q", code, errs)
	}
	if code, out, errs := runIn("schedules", "delete", "--config", cfg, "report/tenant-3"); code != 0 {
		t.Fatalf("delete: %d %q %q", code, out, errs)
	}
	if code, _, errs := runIn("history", "--config", cfg, "@report/tenant-3"); code != 0 {
		t.Fatalf("history of a deleted schedule: %d %q", code, errs)
	}
	if code, out, errs := runIn("ticks", "--config", cfg, "@report/tenant-3"); code != 0 || !strings.Contains(out+errs, "no runtime schedule report/tenant-3 now") {
		t.Fatalf("ticks of a deleted schedule: %d %q %q", code, out, errs)
	}
}
