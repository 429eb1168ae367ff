package worker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// historyOf waits until job's history has n records satisfying done and
// returns them, newest tick first.
func historyOf(t *testing.T, e *env, job string, n int, done func([]jobs.RunRecord) bool) []jobs.RunRecord {
	t.Helper()
	var recs []jobs.RunRecord
	var err error
	poll.Require(t, worktest.Wait, fmt.Sprintf("%d history records of %s", n, job), func() bool {
		recs, err = history.Read(context.Background(), e.RDB, "baton", job, 0)
		return err == nil && len(recs) == n && (done == nil || done(recs))
	})
	return recs
}

// Each run is one record that follows it from dispatch to its end: who
// dispatched it, who ran it, its fence, and how it ended; a failed run keeps
// the tail of its output with secrets masked, a skipped tick says why, and
// ticks that were not dispatched say so.
func TestHistoryRecordsEachRun(t *testing.T) {
	t.Setenv("BATON_HIST_TOKEN", "hist-secret-123")
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    max_retry: 0
    concurrency: allow
    exec:
      command: [sh, -c, 'if [ "$BATON_ATTEMPT" = 1 ] && [ "$BATON_RUN_ID" = run-report-2 ]; then echo "token ${BATON_HIST_TOKEN}"; exit 3; fi']
`)
	w := e.worker(t, cfg, executor.New(), WithReplica("worker-1"))
	d := handoff.New(cfg, e.Client, w, handoff.WithQueueRedis(e.RDB))
	ok, bad := worktest.TickOf("report", 1), worktest.TickOf("report", 2)
	for _, tk := range []scheduler.Tick{ok, bad} {
		if err := d.Dispatch(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
	}
	e.State(t, "baton:default", ok, asynq.TaskStateCompleted)
	e.State(t, "baton:default", bad, asynq.TaskStateArchived)
	missed, paused := worktest.TickOf("report", 3), worktest.TickOf("report", 4)
	d.NotDispatched(context.Background(), missed, false, "past its starting deadline")
	d.NotDispatched(context.Background(), paused, true, "the job is paused")
	d.NotDispatched(context.Background(), paused, true, "the job is paused") // a second replica saw it too

	recs := historyOf(t, e, "report", 4, func(r []jobs.RunRecord) bool {
		return r[2].Status != jobs.StatusRunning && r[3].Status != jobs.StatusRunning
	})
	byTick := map[int]jobs.RunRecord{}
	for _, r := range recs {
		byTick[worktest.TickNumber(r.Tick)] = r
	}
	if r := byTick[1]; r.Status != jobs.StatusOK || r.RunID != ok.RunID || r.Dispatcher != "sched-1" || r.Worker != "worker-1" ||
		r.Fence <= 0 || r.Attempt != 1 || r.ExitCode == nil || *r.ExitCode != 0 || r.Started.IsZero() || r.Ended.Before(r.Started) {
		t.Errorf("the successful run: %+v", r)
	}
	r := byTick[2]
	if r.Status != jobs.StatusFailed || r.ExitCode == nil || *r.ExitCode != 3 || !strings.Contains(r.Output, "token xxxxx") {
		t.Errorf("the failed run: %+v", r)
	}
	if strings.Contains(r.Output+r.Reason, "hist-secret-123") {
		t.Errorf("the history shows a secret: %+v", r)
	}
	if r := byTick[3]; r.Status != jobs.StatusMissed || r.Reason != "past its starting deadline" || r.RunID != "" {
		t.Errorf("the missed tick: %+v", r)
	}
	if r := byTick[4]; r.Status != jobs.StatusPaused {
		t.Errorf("the paused tick, recorded by two replicas: %+v", r)
	}
	if worktest.TickNumber(recs[0].Tick) != 4 || worktest.TickNumber(recs[3].Tick) != 1 {
		t.Errorf("records are not newest tick first: %v ... %v", recs[0].Tick, recs[3].Tick)
	}
}

// A tick that finds the job running (forbid) is recorded as skipped, naming
// the run that held the job.
func TestHistoryRecordsSkips(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: slow
    schedule: "@every 1m"
    handler: {name: slow}
`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	e.worker(t, cfg, exec)
	d := handoff.New(cfg, e.Client, nil, handoff.WithQueueRedis(e.RDB))
	t1, t2 := worktest.TickOf("slow", 1), worktest.TickOf("slow", 2)
	if err := d.Dispatch(context.Background(), t1); err != nil {
		t.Fatal(err)
	}
	worktest.Recv(t, exec.started, "first run")
	if err := d.Dispatch(context.Background(), t2); err != nil {
		t.Fatal(err)
	}
	recs := historyOf(t, e, "slow", 2, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusSkipped })
	if !strings.Contains(recs[0].Reason, "another run holds the job") || !strings.Contains(recs[0].Reason, t1.ID()) ||
		!strings.Contains(recs[0].Reason, "within lock_ttl") {
		t.Errorf("skip reason %q: want the holder %s", recs[0].Reason, t1.ID())
	}
	if recs[1].Status != jobs.StatusRunning {
		t.Errorf("the first run: %+v", recs[1])
	}
	close(gate)
	historyOf(t, e, "slow", 2, func(r []jobs.RunRecord) bool { return r[1].Status == jobs.StatusOK })
}

// A failed run's reason names neither the job nor the tick (its record
// does) nor the package twice; the task's last error names the tick once.
func TestFailureReasonSaysItOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    max_retry: 0
    exec: {command: [sh, -c, 'exit 3']}
`)
	w := e.worker(t, cfg, executor.New(), WithReplica("worker-1"))
	d := handoff.New(cfg, e.Client, w, handoff.WithQueueRedis(e.RDB))
	bad := worktest.TickOf("report", 1)
	if err := d.Dispatch(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	info := e.State(t, "baton:default", bad, asynq.TaskStateArchived)
	recs := historyOf(t, e, "report", 1, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusFailed })
	const why = `non-zero exit: "sh" exited with code 3`
	if recs[0].Reason != why {
		t.Errorf("reason %q, want %q", recs[0].Reason, why)
	}
	if want := "worker: " + bad.ID() + ": " + why + " (last attempt"; !strings.HasPrefix(info.LastErr, want) {
		t.Errorf("the task's last error %q, want %q", info.LastErr, want)
	}
}

// A run that ends within history.start_after leaves one history entry, written
// with its end, which says how long it took and who dispatched it: the
// record still has its start, its end and its dispatcher.
func TestShortRunIsOneHistoryEntry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: quick
    schedule: "@every 1m"
    exec:
      command: ["true"]
`)
	cfg.History.StartAfter = time.Second
	// the clock that would write the "started" entry stands still: the run
	// ends before startedAfter however long a loaded machine takes
	clk := clock.NewFake(time.Now())
	w := e.worker(t, cfg, executor.New(), WithReplica("worker-1"), WithClock(clk))
	d := handoff.New(cfg, e.Client, w, handoff.WithQueueRedis(e.RDB))
	tk := worktest.TickOf("quick", 1)
	if err := d.Dispatch(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	recs := historyOf(t, e, "quick", 1, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusOK })
	if r := recs[0]; r.Started.IsZero() || r.Ended.Before(r.Started) || r.Dispatcher != "sched-1" || r.Worker != "worker-1" || r.Fence <= 0 {
		t.Errorf("the run's record: %+v", r)
	}
	entries, err := e.RDB.XRange(context.Background(), "baton:{history:quick}", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Values["ev"] != "finished" || entries[0].Values["took_ms"] == nil {
		t.Errorf("history entries %v; want one finished entry with took_ms", entries)
	}
}

// startLongRun dispatches a run of job "long" (history.start_after 1s, on
// the fake clock clk) that runs until the file gate exists, and waits
// until it has started.
func startLongRun(t *testing.T) (e *env, clk *clock.Fake, gate string) {
	t.Helper()
	e = newEnv(t)
	gate = t.TempDir() + "/go"
	cfg := e.Config(t, fmt.Sprintf(`  - name: long
    schedule: "@every 1m"
    exec:
      command: [sh, -c, 'while [ ! -e %q ]; do sleep 0.02; done']
`, gate))
	cfg.History.StartAfter = time.Second
	now := time.Now()
	clk = clock.NewFake(now)
	w := e.worker(t, cfg, executor.New(), WithReplica("worker-1"), WithClock(clk))
	d := handoff.New(cfg, e.Client, w, handoff.WithQueueRedis(e.RDB))
	if err := d.Dispatch(context.Background(), worktest.TickOf("long", 1)); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, worktest.Wait, "the run to start", func() bool { return clk.Waiting(now.Add(cfg.History.StartAfter)) })
	return e, clk, gate
}

// A run that lasts longer than history.start_after shows as running while it
// runs, and its end completes the same record.
func TestLongRunShowsAsRunning(t *testing.T) {
	t.Parallel()
	e, clk, gate := startLongRun(t)
	if recs, _ := history.Read(context.Background(), e.RDB, "baton", "long", 0); len(recs) != 0 {
		t.Fatalf("history %+v before startedAfter; want none", recs)
	}
	clk.Advance(time.Second)
	running := historyOf(t, e, "long", 1, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusRunning })
	if running[0].Started.IsZero() || running[0].Worker != "worker-1" {
		t.Errorf("the running record: %+v", running[0])
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	done := historyOf(t, e, "long", 1, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusOK })
	if r := done[0]; !r.Started.Equal(running[0].Started) || r.Ended.Before(r.Started) {
		t.Errorf("the ended record %+v; started %v while running", r, running[0].Started)
	}
}

// A run that lasts beyond history.start_after has its "started" entry
// written then, and the entry's stream ID is its time: the record's start
// must still be when the run started, not start_after (here 1s) later,
// or every long run shows a start a second late and a duration a second
// short (the ledger's duration_ms, baton history, the dashboard).
func TestLongRunRecordStartsWhenTheRunStarted(t *testing.T) {
	t.Parallel()
	e, clk, gate := startLongRun(t)
	running := time.Now() // the run has started by now
	time.Sleep(700 * time.Millisecond)
	clk.Advance(time.Second) // the run has lasted start_after
	recs := historyOf(t, e, "long", 1, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusRunning })
	if got := recs[0].Started; got.After(running.Add(200 * time.Millisecond)) {
		t.Errorf("the running record's start %v is %s after the run was seen running (%v)",
			got.Format(time.RFC3339Nano), got.Sub(running), running.Format(time.RFC3339Nano))
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	historyOf(t, e, "long", 1, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusOK })
}

// A worker SIGKILLed while a run is under way leaves a record that the run
// started, under the default history.start_after (0: every start written
// as the run starts): else the tick reads as dispatched and never started
// (the ledger's "dispatched; no run recorded yet", baton status, the
// dashboard), asynq's recovery may run it again with no trace that attempt
// 1 ran, and the ledger's check for runs whose worker died (a "running"
// record past its timeout) never sees it.
func TestRunOfKilledWorkerLeavesARecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jobsYAML := `  - name: doomed
    schedule: "@every 1m"
    timeout: 10s
    handler: {name: slow}
`
	cfg := e.Config(t, jobsYAML, "{concurrency: 1, shutdown_grace: 2s}")
	proc, lines := e.workerProcess(t, e.YAML(jobsYAML, "{concurrency: 1, shutdown_grace: 2s}"))
	tk := worktest.TickOf("doomed", 1)
	e.dispatch(t, cfg, tk)
	if l := worktest.Recv(t, lines, "the run in the worker process"); !strings.HasPrefix(l, "started ") {
		t.Fatalf("worker process said %q", l)
	}
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = proc.Wait()
	var recs []jobs.RunRecord
	poll.Until(time.Second, func() bool {
		recs, _ = history.Read(context.Background(), e.RDB, "baton", "doomed", 0)
		return len(recs) > 0
	})
	if len(recs) != 1 || recs[0].Status != jobs.StatusRunning || recs[0].Worker != "doomed" {
		t.Errorf("history of the killed worker's run: %+v; want one record, running on %q", recs, "doomed")
	}
}
