package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
)

func TestStatusShowsSingletonHolder(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: stest
jobs:
  - name: pump
    mode: singleton
    lock_ttl: 5s
    exec: {command: ["true"]}
  - name: tick
    schedule: "@every 1m"
    paused: true
    exec: {command: ["true"]}
`, srv.Addr()))
	code, out, errs := runIn("status", "--config", cfg)
	if code != 0 || !strings.Contains(out, "pump") || !strings.Contains(out, "yes (config)") {
		t.Fatalf("status without a holder: %d %q %q", code, out, errs)
	}
	rdb := srv.TestClient(t)
	locks, err := locking.New(rdb, locking.WithFreshDeployment(), locking.WithPrefix("stest:lock:"))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	e, err := locks.Election("singleton:pump", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	term, err := e.Campaign(ctx, "replica-7")
	if err != nil {
		t.Fatal(err)
	}
	defer term.Resign(ctx)
	code, out, errs = runIn("status", "--config", cfg)
	if code != 0 || !strings.Contains(out, "replica-7") || !strings.Contains(out, fmt.Sprint(term.Fence())) {
		t.Fatalf("status with a holder: %d %q %q", code, out, errs)
	}
	if !strings.Contains(out, "REPLICAS: none seen") {
		t.Errorf("status without replicas:\n%s", out)
	}
	// a task left in a queue nobody consumes is pointed out
	client := asynq.NewClientFromRedisClient(rdb)
	if _, err := client.Enqueue(asynq.NewTask("baton:run", nil, asynq.Queue("stest:orphan"))); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runIn("status", "--config", cfg)
	if code != 0 || !strings.Contains(out, `queue "stest:orphan" holds 1 pending`) {
		t.Errorf("status with an orphaned queue: %d\n%s%s", code, out, errs)
	}
}

// baton status shows per job when its last success ended and, for a job
// whose latest runs failed, how many in a row with the newest reason and
// output line, escaped (they come from Redis).
func TestStatusPrintsFailureStreakAndLastSuccess(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	exit3 := 3
	st := &baton.Status{Time: now, Jobs: []baton.JobStatus{
		{Name: "flaky", Mode: "cron", Schedule: "@hourly", Next: now.Add(time.Hour), FailureStreak: 4, LastSuccess: now.Add(-5 * time.Hour),
			Last: &jobs.RunRecord{Tick: now.Add(-time.Hour), Status: jobs.StatusFailed, ExitCode: &exit3,
				Reason: `non-zero exit: "sh" exited with code 3`, Output: "step 1\n\x1b[31mvendor down\x1b[0m\n"}},
		{Name: "never", Mode: "cron", Schedule: "@hourly", FailureStreak: 1, Last: &jobs.RunRecord{Status: jobs.StatusTimedOut}},
		{Name: "fine", Mode: "cron", Schedule: "@hourly", LastSuccess: now.Add(-time.Minute)},
	}}
	var b strings.Builder
	printStatus(&b, st)
	out := b.String()
	for _, want := range []string{
		"2030-01-01T07:00:00Z (5h0m0s ago)",
		"2030-01-01T11:59:00Z (1m0s ago)",
		`flaky: 4 failed runs in a row, last success 2030-01-01T07:00:00Z (5h0m0s ago); last: "non-zero exit: \"sh\" exited with code 3", output: "\x1b[31mvendor down\x1b[0m"`,
		"never: 1 failed run in a row, no success in the history",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("status prints a control character read from Redis:\n%q", out)
	}
}

// baton status prints the newest history entry of a job, its status forged
// with terminal escapes by a Redis writer, escaped in the LAST cell, and a
// failing job's forged reason and output escaped in its failure line: no
// raw escape, tab or extra line reaches the terminal.
func TestStatusPrintsRedisTextInert(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: inert
jobs:
  - name: report
    schedule: "@hourly"
    exec: {command: ["true"]}
  - name: flaky
    schedule: "@hourly"
    exec: {command: ["true"]}
`, srv.Addr()))
	tick := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	forgeHistory(t, srv, "inert", "report", tick, "run-1", forged, "")
	forgeHistory(t, srv, "inert", "flaky", tick, "run-2", string(jobs.StatusFailed), forged+"\nnext line")
	code, out, errs := runIn("status", "--config", cfg)
	if code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}
	if strings.ContainsAny(out, "\x1b\t") {
		t.Errorf("status printed raw control characters:\n%q", out)
	}
	var report, failing string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "report "):
			report = l
		case strings.HasPrefix(l, "flaky: "):
			failing = l
		}
	}
	if !strings.Contains(report, `2026-11-28T10:00:00Z \x1b[2K\x1b[1G ok on r1`) {
		t.Errorf("report's row does not show the forged status escaped:\n%s", out)
	}
	if !strings.Contains(failing, `last: "\x1b[2K\x1b[1G ok", output: "\x1b[2K\x1b[1G ok"`) {
		t.Errorf("flaky's failure line does not show the forged reason and output escaped:\n%s", out)
	}
	if strings.Contains(out, "\nnext line") {
		t.Errorf("a newline in a reason started a line of its own:\n%s", out)
	}
}

// A worker runs a forbid job (lock_ttl 2s) and is SIGKILLed mid-run (its
// child dies with it). The history keeps "started" with no end, but once
// the execution lease has expired `baton status` no longer lists the run
// as running.
func TestStatusForgetsADeadWorkersRun(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: rvdie
worker: {shutdown_grace: 1s}
jobs:
  - name: slow
    schedule: "@yearly"
    lock_ttl: 2s
    max_retry: 0
    exec: {command: ["sleep", "30"]}
`, srv.Addr()))
	p := start(t, nil, "worker", "--config", cfg, "--http", "")
	if code, _, errs := runIn("trigger", "--config", cfg, "slow"); code != 0 {
		t.Fatal(errs)
	}
	status := func() baton.Status {
		var st baton.Status
		code, out, errs := runIn("status", "--config", cfg, "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status: %d %v %s", code, err, errs)
		}
		return st
	}
	poll.Require(t, 15*time.Second, "the run under way with its lock", func() bool {
		st := status()
		return len(st.Jobs[0].Running) == 1 && st.Jobs[0].Lock != nil
	})
	_ = p.cmd.Process.Kill()
	p.wait(t, 10*time.Second)
	var st baton.Status
	poll.Require(t, 10*time.Second, "the execution lease gone", func() bool { st = status(); return st.Jobs[0].Lock == nil })
	if r := st.Jobs[0].Running; len(r) > 0 {
		t.Errorf("status lists %d run(s) as running (worker %s, started %s) although its worker is dead and the job's execution lease is gone; history: %q",
			len(r), r[0].Worker, r[0].Started.Format(time.RFC3339), strings.TrimSpace(func() string { _, out, _ := runIn("history", "--config", cfg, "slow"); return out }()))
	}
}

// baton status summarises the runtime schedules in a few lines, whatever
// their number: how many, the first paused, the refused ones with why,
// quoted (ids and reasons come from Redis), and a store that went back.
func TestStatusPrintsRuntimeSchedulesSummary(t *testing.T) {
	t.Parallel()
	st := &baton.Status{Time: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC), Schedules: &baton.SchedulesStatus{
		Count: 100000, Paused: 3, PausedFirst: []string{"report/a", "report/b"},
		Refused: 2, RefusedFirst: []baton.ScheduleProblem{{ID: "hook/\x1bx", Job: "@hook/\x1bx", Why: "not signed"}},
		Failing: 1, FailingFirst: []baton.ScheduleProblem{{ID: "report/c", Job: "@report/c", Why: "3 failed runs in a row; last: boom"}},
		WentBack: &baton.StoreWentBack{At: time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC), Replica: "r\x1b1", Had: 900, Now: 0, PutBack: 99998, Deleted: 2},
	}}
	var b strings.Builder
	printStatus(&b, st)
	out := b.String()
	for _, want := range []string{
		"RUNTIME SCHEDULES: 100000 (baton schedules list), 3 paused, 2 refused, 1 failing",
		`failing: "report/c": "3 failed runs in a row; last: boom"`,
		`paused: "report/a", "report/b" and 1 more`,
		`refused: "hook/\x1bx": "not signed"`,
		"refused: 1 more",
		`STORE WENT BACK at 2030-01-01T11:00:00Z (the queue Redis restarted without persistence, or from an older snapshot): replica "r\x1b1" had read version 900, found 0; put back 99998, deleted again 2`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("status prints a control character read from Redis:\n%q", out)
	}
}

// The replica table shows ids, roles, versions and queues as they are
// (escaped, not quoted); a singleton's RUNNING cell names its leader.
func TestStatusTablesShowNamesAsTheyAre(t *testing.T) {
	t.Parallel()
	st := &baton.Status{Time: time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC),
		Jobs: []baton.JobStatus{{Name: "pump", Mode: "singleton", Leader: &locking.Leader{ID: "r2", Since: time.Date(2030, 1, 1, 11, 0, 0, 0, time.UTC), Fence: 9}}},
		Replicas: []baton.ReplicaStatus{{ID: "r1", Role: "run", Version: "v1.2", ListHash: "abc", Queues: []string{"default", "bad\x1bq"},
			LastSeen: time.Date(2030, 1, 1, 11, 59, 58, 0, time.UTC), Live: true}},
	}
	var b strings.Builder
	printStatus(&b, st)
	out := b.String()
	for _, want := range []string{"led by r2 since 2030-01-01T11:00:00Z", "r1 ", " run ", "v1.2", "default,bad\\x1bq"} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"r1"`) || strings.Contains(out, `"run"`) {
		t.Errorf("the replica table quotes its values:\n%s", out)
	}
}

// baton status lists each limit shared by jobs: its slots held on a quorum
// and the run holding each, as its holder record names it; a slot whose
// record is missing is held by a run unknown.
func TestStatusShowsWhoHoldsALimitsSlots(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: stest
limits: {warehouse: 3}
jobs:
  - name: extract
    schedule: "@every 1m"
    limit: warehouse
    exec: {command: ["true"]}
  - name: load
    schedule: "@every 1m"
    limit: warehouse
    exec: {command: ["true"]}
`, srv.Addr()))
	rdb := srv.TestClient(t)
	locks, err := locking.New(rdb, locking.WithFreshDeployment(), locking.WithPrefix("stest:lock:"))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	sem, err := locks.Semaphore("limit:warehouse", 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var leases []*locking.Lease
	for range 2 {
		l, err := sem.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		leases = append(leases, l)
	}
	idx := strings.TrimPrefix(leases[0].Key(), "sem:limit:warehouse#")
	rec := `{"v":1,"job":"extract","id":"extract@2030-01-01T00:00:00Z","tick":"2030-01-01T00:00:00Z","run_id":"r1","attempt":1,"replica":"replica-9","started":1893456000000,"fence":7}`
	if err := rdb.Set(ctx, "stest:{limit:warehouse}:holder:"+idx, rec, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runIn("status", "--config", cfg)
	if code != 0 {
		t.Fatalf("status: %d %s%s", code, out, errs)
	}
	for _, want := range []string{"2 of 3", "extract,load", "slot " + idx + ": extract@2030-01-01T00:00:00Z on replica-9 since 2030-01-01T00:00:00Z",
		": a run unknown (fence "} {
		if !strings.Contains(out, want) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
	code, out, errs = runIn("status", "--config", cfg, "--json")
	var st baton.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Limits) != 1 || len(st.Limits[0].Held) != 2 {
		t.Fatalf("status --json: %d %s%s", code, out, errs)
	}
	for _, s := range st.Limits[0].Held {
		if (s.Holder != nil) != (fmt.Sprint(s.Index) == idx) || s.Fence <= 0 {
			t.Errorf("slot %+v", s)
		}
	}
}

// After a limit was lowered, the runs on slots at or above its new size
// go on until they end (docs/scheduling.md): baton status counts and
// lists them too.
func TestStatusShowsSlotsAboveALoweredLimit(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: stest
limits: {warehouse: 1}
jobs:
  - name: extract
    schedule: "@every 1m"
    limit: warehouse
    exec: {command: ["true"]}
`, srv.Addr()))
	rdb := srv.TestClient(t)
	locks, err := locking.New(rdb, locking.WithFreshDeployment(), locking.WithPrefix("stest:lock:"))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	sem, err := locks.Semaphore("limit:warehouse", 2) // the size before
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		l, err := sem.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
	}
	code, out, errs := runIn("status", "--config", cfg, "--json")
	var st baton.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Limits) != 1 {
		t.Fatalf("status --json: %d %s%s", code, out, errs)
	}
	if held := st.Limits[0].Held; len(held) != 2 {
		t.Errorf("status lists the slots %+v held; two runs hold slots 0 and 1", held)
	}
}
