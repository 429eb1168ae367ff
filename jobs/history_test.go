package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/scheduler"
)

// historyOf waits until job's history has n records satisfying done and
// returns them, newest tick first.
func historyOf(t *testing.T, e *env, job string, n int, done func([]RunRecord) bool) []RunRecord {
	t.Helper()
	var recs []RunRecord
	var err error
	poll.Require(t, wait, fmt.Sprintf("%d history records of %s", n, job), func() bool {
		recs, err = ReadHistory(context.Background(), e.rdb, "baton", job, 0)
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
	cfg := e.config(t, `  - name: report
    schedule: "@every 1m"
    max_retry: 0
    concurrency: allow
    exec:
      command: [sh, -c, 'if [ "$BATON_ATTEMPT" = 1 ] && [ "$BATON_RUN_ID" = run-report-2 ]; then echo "token ${BATON_HIST_TOKEN}"; exit 3; fi']
`)
	w := e.worker(t, cfg, NewExecutor(), WithReplica("worker-1"))
	d := NewDispatcher(cfg, e.client, w, WithQueueRedis(e.rdb))
	ok, bad := tickOf("report", 1), tickOf("report", 2)
	for _, tk := range []scheduler.Tick{ok, bad} {
		if err := d.Dispatch(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
	}
	e.state(t, "baton:default", ok, asynq.TaskStateCompleted)
	e.state(t, "baton:default", bad, asynq.TaskStateArchived)
	missed, paused := tickOf("report", 3), tickOf("report", 4)
	d.NotDispatched(context.Background(), missed, false, "past its starting deadline")
	d.NotDispatched(context.Background(), paused, true, "the job is paused")
	d.NotDispatched(context.Background(), paused, true, "the job is paused") // a second replica saw it too

	recs := historyOf(t, e, "report", 4, func(r []RunRecord) bool { return r[2].Status != StatusRunning && r[3].Status != StatusRunning })
	byTick := map[int]RunRecord{}
	for _, r := range recs {
		byTick[tickNumber(r.Tick)] = r
	}
	if r := byTick[1]; r.Status != StatusOK || r.RunID != ok.RunID || r.Dispatcher != "sched-1" || r.Worker != "worker-1" ||
		r.Fence <= 0 || r.Attempt != 1 || r.ExitCode == nil || *r.ExitCode != 0 || r.Started.IsZero() || r.Ended.Before(r.Started) {
		t.Errorf("the successful run: %+v", r)
	}
	r := byTick[2]
	if r.Status != StatusFailed || r.ExitCode == nil || *r.ExitCode != 3 || !strings.Contains(r.Output, "token xxxxx") {
		t.Errorf("the failed run: %+v", r)
	}
	if strings.Contains(r.Output+r.Reason, "hist-secret-123") {
		t.Errorf("the history shows a secret: %+v", r)
	}
	if r := byTick[3]; r.Status != StatusMissed || r.Reason != "past its starting deadline" || r.RunID != "" {
		t.Errorf("the missed tick: %+v", r)
	}
	if r := byTick[4]; r.Status != StatusPaused {
		t.Errorf("the paused tick, recorded by two replicas: %+v", r)
	}
	if tickNumber(recs[0].Tick) != 4 || tickNumber(recs[3].Tick) != 1 {
		t.Errorf("records are not newest tick first: %v ... %v", recs[0].Tick, recs[3].Tick)
	}
}

// A tick decided not to run is written to the history once, whichever
// replicas' claims found it so: every one of them records it, since the
// replica that decided it may have died before it wrote its record. A
// backfill's decision is a record of its own.
func TestNotRunRecordedOncePerTick(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: report
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	ctx := context.Background()
	d := NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb))
	missed, paused := tickOf("report", 1), tickOf("report", 2)
	for _, replica := range []string{"sched-1", "sched-2", "sched-3"} {
		missed.Replica, paused.Replica = replica, replica
		d.NotDispatched(ctx, missed, false, "past its starting deadline")
		d.NotDispatched(ctx, paused, true, "the job is paused")
	}
	backfill := tickOf("report", 1)
	backfill.Backfill = true
	d.NotDispatched(ctx, backfill, false, "past its starting deadline")
	events, err := e.rdb.XRange(ctx, historyKey("baton", "report"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	byTick := map[string]int{}
	for _, ev := range events {
		byTick[fmt.Sprint(ev.Values["tick"], " ", ev.Values["status"])]++
	}
	want := map[string]int{
		fmt.Sprint(missed.At.UTC().Format(time.RFC3339Nano), " missed"): 2, // one decided, one backfill
		fmt.Sprint(paused.At.UTC().Format(time.RFC3339Nano), " paused"): 1,
	}
	if !maps.Equal(byTick, want) {
		t.Errorf("history events by tick and status: %v, want %v", byTick, want)
	}
}

// A tick that finds the job running (forbid) is recorded as skipped, naming
// the run that held the job.
func TestHistoryRecordsSkips(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: slow
    schedule: "@every 1m"
    handler: {name: slow}
`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	e.worker(t, cfg, exec)
	d := NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb))
	t1, t2 := tickOf("slow", 1), tickOf("slow", 2)
	if err := d.Dispatch(context.Background(), t1); err != nil {
		t.Fatal(err)
	}
	recv(t, exec.started, "first run")
	if err := d.Dispatch(context.Background(), t2); err != nil {
		t.Fatal(err)
	}
	recs := historyOf(t, e, "slow", 2, func(r []RunRecord) bool { return r[0].Status == StatusSkipped })
	if !strings.Contains(recs[0].Reason, "another run holds the job") || !strings.Contains(recs[0].Reason, t1.ID()) {
		t.Errorf("skip reason %q: want the holder %s", recs[0].Reason, t1.ID())
	}
	if recs[1].Status != StatusRunning {
		t.Errorf("the first run: %+v", recs[1])
	}
	close(gate)
	historyOf(t, e, "slow", 2, func(r []RunRecord) bool { return r[1].Status == StatusOK })
}

// The history keeps about history.runs runs per job, the newest.
func TestHistoryIsBounded(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: tiny
    schedule: "@every 1m"
    handler: {name: tiny}
`)
	cfg.History.Runs = 5
	h := &history{cfg: cfg, rdb: e.rdb, log: testLogger(t)}
	for i := range 400 {
		tk := tickOf("tiny", 0)
		tk.At = tk.At.Add(time.Duration(i) * time.Minute)
		tk.RunID = fmt.Sprintf("r%d", i)
		h.dispatched(context.Background(), tk)
	}
	n, err := e.rdb.XLen(context.Background(), historyKey("baton", "tiny")).Result()
	if err != nil {
		t.Fatal(err)
	}
	// approximate trimming keeps at least runs x eventsPerRun, and frees
	// whole nodes of 100 entries
	if n < 15 || n > 150 {
		t.Errorf("%d entries kept, want about %d", n, 5*eventsPerRun)
	}
	recs, err := ReadHistory(context.Background(), e.rdb, "baton", "tiny", 3)
	if err != nil || len(recs) != 3 || recs[0].RunID != "r399" {
		t.Fatalf("newest 3: %+v, %v", recs, err)
	}
	if ttl := e.rdb.PTTL(context.Background(), historyKey("baton", "tiny")).Val(); ttl <= 0 || ttl > cfg.History.MaxAge {
		t.Errorf("history key ttl %v, want at most max_age %v", ttl, cfg.History.MaxAge)
	}
}

// Every history event carries its format version as its first field.
func TestHistoryEventsCarryFormatVersion(t *testing.T) {
	tick := scheduler.Tick{Job: "report", At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), RunID: "r1", Manual: true}
	got := fmt.Sprint(tickFields(evStarted, tick))
	if want := "[v 1 ev started tick 2026-11-28T12:00:00Z run r1 manual 1]"; got != want {
		t.Fatalf("fields %s, want %s", got, want)
	}
}

// A failed run's reason names neither the job nor the tick (its record
// does) nor the package twice; the task's last error names the tick once.
func TestFailureReasonSaysItOnce(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: report
    schedule: "@every 1m"
    max_retry: 0
    exec: {command: [sh, -c, 'exit 3']}
`)
	w := e.worker(t, cfg, NewExecutor(), WithReplica("worker-1"))
	d := NewDispatcher(cfg, e.client, w, WithQueueRedis(e.rdb))
	bad := tickOf("report", 1)
	if err := d.Dispatch(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	info := e.state(t, "baton:default", bad, asynq.TaskStateArchived)
	recs := historyOf(t, e, "report", 1, func(r []RunRecord) bool { return r[0].Status == StatusFailed })
	const why = `non-zero exit: "sh" exited with code 3`
	if recs[0].Reason != why {
		t.Errorf("reason %q, want %q", recs[0].Reason, why)
	}
	if want := "jobs: " + bad.ID() + ": " + why + " (last attempt"; !strings.HasPrefix(info.LastErr, want) {
		t.Errorf("the task's last error %q, want %q", info.LastErr, want)
	}
}

// cleanReason drops, from each line, what a history record already says:
// the package prefixes, the tick and the job's name.
func TestCleanReason(t *testing.T) {
	tk := tickOf("report", 1)
	for _, tc := range []struct{ in, want string }{
		{"jobs: " + tk.ID() + `: jobs: job "report": exec "x": file not found`, `exec "x": file not found`},
		{`jobs: non-zero exit: job "report": "sh" exited with code 3`, `non-zero exit: "sh" exited with code 3`},
		{`jobs: job "report": http GET https://h/: EOF` + "\njobs: " + tk.ID() + ": execution lease lost mid-run: locking: lost",
			"http GET https://h/: EOF\nexecution lease lost mid-run: locking: lost"},
		{`job "other": stays; the jobs: word stays`, `job "other": stays; the jobs: word stays`},
		{"past its starting deadline", "past its starting deadline"},
	} {
		if got := cleanReason(tk, tc.in); got != tc.want {
			t.Errorf("cleanReason(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// The failure streak counts the failed runs since the newest success,
// passing over ticks that did not run and runs under way or skipped.
func TestFailureStreak(t *testing.T) {
	rec := func(s ...Status) []RunRecord {
		out := make([]RunRecord, len(s))
		for i, st := range s {
			out[i] = RunRecord{Status: st, RunID: fmt.Sprint(i)}
		}
		return out
	}
	for _, tc := range []struct {
		recs  []RunRecord
		n     int
		okRun string // "" none
	}{
		{nil, 0, ""},
		{rec(StatusOK, StatusFailed), 0, "0"},
		{rec(StatusRunning, StatusFailed, StatusMissed, StatusTimedOut, StatusSkipped, StatusLeaseLost, StatusOK, StatusFailed), 3, "6"},
		{rec(StatusFailed, StatusFailed), 2, ""},
		{rec(StatusPaused, StatusDispatched, StatusReplaced, StatusDropped), 0, ""},
	} {
		n, ok := FailureStreak(tc.recs)
		got := ""
		if ok != nil {
			got = ok.RunID
		}
		if n != tc.n || got != tc.okRun {
			t.Errorf("FailureStreak(%v) = %d, %q; want %d, %q", tc.recs, n, got, tc.n, tc.okRun)
		}
	}
}

// A history entry whose tick or numbers do not parse is reported, naming
// the stream's key and the entry, never read as tick zero, fence 0 or
// attempt 0: a tick that ran must not look as if it had not (backfills and
// catch-ups decide on the history). The records that do parse still come.
func TestCorruptHistoryEntryIsReported(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key := historyKey("baton", "h")
	tick := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339Nano)
	add := func(fields ...any) string {
		t.Helper()
		id, err := e.rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: fields}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	add("ev", evNotRun, "tick", tick, "status", string(StatusMissed), "reason", "late")
	for _, tc := range []struct {
		field  string
		fields []any
	}{
		{"tick", []any{"ev", evStarted, "tick", "yesterday", "run", "r1", "attempt", "1", "fence", "5"}},
		{"fence", []any{"ev", evStarted, "tick", tick, "run", "r2", "attempt", "1", "fence", "9223372036854775808"}},
		{"attempt", []any{"ev", evFinished, "tick", tick, "run", "r3", "attempt", "1.5", "status", string(StatusOK)}},
		{"exit_code", []any{"ev", evFinished, "tick", tick, "run", "r4", "exit_code", "abc", "status", string(StatusFailed)}},
	} {
		id := add(tc.fields...)
		recs, err := ReadHistory(ctx, e.rdb, "baton", "h", 0)
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Key != key || !strings.Contains(ce.Field, id) || !strings.Contains(ce.Field, tc.field) {
			t.Fatalf("history with a bad %s (entry %s) = %v, want ErrCorrupt naming %q, the entry and the field", tc.field, id, err, key)
		}
		if len(recs) != 1 || recs[0].Status != StatusMissed {
			t.Fatalf("records beside the bad %s = %+v, want the missed tick alone", tc.field, recs)
		}
		if err := e.rdb.XDel(ctx, key, id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadHistory(ctx, e.rdb, "baton", "h", 0); err != nil {
		t.Fatalf("history after the bad entries were deleted: %v", err)
	}
}

// History fold, schedule: a manual trigger's "dispatched" event is written
// by the dispatcher after the enqueue returns, so a fast worker's started
// and finished events can land first. The record must still end "ok".
func TestHistoryDispatchedAfterFinished(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: m
    schedule: "@every 1m"
    concurrency: allow
    exec: {command: ["true"]}
`)
	h := &history{cfg: cfg, rdb: e.rdb, log: testLogger(t)}
	tk := tickOf("m", 1)
	tk.Manual = true
	run := Run{Job: "m", Tick: tk.At, RunID: tk.RunID, Attempt: 1, Fence: 9, Replica: "w1"}
	job, _ := cfg.Job("m")
	ctx := context.Background()
	h.started(ctx, tk, run)
	h.finished(ctx, tk, run, StatusOK, job, Result{ExitCode: 0}, "", "")
	h.dispatched(ctx, tk)
	recs, err := ReadHistory(ctx, e.rdb, cfg.Namespace, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != StatusOK || !recs[0].Manual {
		t.Errorf("records: %+v", recs)
	}
}

// History fold, schedule: attempt 1 fails, attempt 2 starts, its worker
// dies (no finished event). The record says "running", attempt 2, with the
// failure of attempt 1 cleared.
func TestHistoryRetryThenDeath(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: r
    schedule: "@every 1m"
    concurrency: allow
    exec: {command: ["true"]}
`)
	h := &history{cfg: cfg, rdb: e.rdb, log: testLogger(t)}
	tk := tickOf("r", 1)
	job, _ := cfg.Job("r")
	ctx := context.Background()
	r1 := Run{Job: "r", Tick: tk.At, RunID: tk.RunID, Attempt: 1, Fence: 9, Replica: "w1"}
	h.started(ctx, tk, r1)
	h.finished(ctx, tk, r1, StatusFailed, job, Result{ExitCode: 3}, "exit 3", "boom")
	r2 := r1
	r2.Attempt, r2.Replica, r2.Fence = 2, "w2", 10
	h.started(ctx, tk, r2)
	recs, err := ReadHistory(ctx, e.rdb, cfg.Namespace, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != StatusRunning || recs[0].Attempt != 2 || recs[0].Worker != "w2" || recs[0].Reason != "" || recs[0].ExitCode != nil {
		t.Errorf("records: %+v", recs)
	}
}
