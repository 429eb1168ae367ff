package worker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// admitJobs are the jobs of the admission tests: a job retried once after
// 10ms, one with a start in the future, one with max_runs.
const admitJobs = `  - name: job
    schedule: "@every 1s"
    max_retry: 1
    retry_backoff: 10ms
    handler: {name: job}
  - name: later
    schedule: "@every 1s"
    start: "2100-01-01T00:00:00Z"
    handler: {name: later}
  - name: capped
    schedule: "@every 1s"
    max_runs: 2
    handler: {name: capped}
`

// admitWorker starts a worker of signed admitJobs whose lock master is e's
// Redis (where the pause flags are read).
func admitWorker(t *testing.T, e *env, exec executor.Runner) (*config.Config, *Worker) {
	t.Helper()
	cfg := e.signedConfig(t, []string{keyA}, false, admitJobs)
	return cfg, e.worker(t, cfg, exec, WithLockMasters([]redis.UniversalClient{e.RDB}))
}

// admitWorkerLogged is admitWorker logging to logs.
func admitWorkerLogged(t *testing.T, e *env, exec executor.Runner, logs *worktest.Logs) (*config.Config, *Worker) {
	t.Helper()
	cfg := e.signedConfig(t, []string{keyA}, false, admitJobs)
	return cfg, e.worker(t, cfg, exec, WithLockMasters([]redis.UniversalClient{e.RDB}), WithLogger(logs.Logger()))
}

// refusedRecord waits until job's history has tick's refused record and
// returns it.
func refusedRecord(t *testing.T, e *env, job string, tick scheduler.Tick) jobs.RunRecord {
	t.Helper()
	var rec jobs.RunRecord
	if !poll.Until(worktest.Wait, func() bool {
		recs, _ := history.Read(context.Background(), e.RDB, "baton", job, 0)
		for _, r := range recs {
			if r.Tick.Equal(tick.At) && r.Status == jobs.StatusRefused {
				rec = r
				return true
			}
		}
		return false
	}) {
		recs, _ := history.Read(context.Background(), e.RDB, "baton", job, 0)
		t.Fatalf("no refused record of %s in the history: %+v", tick.ID(), recs)
	}
	return rec
}

// wantRefusals checks the worker's refusal counts: want's, every other 0.
func wantRefusals(t *testing.T, w *Worker, want map[RefusalReason]uint64) {
	t.Helper()
	for r, n := range w.Refusals() {
		if n != want[r] {
			t.Errorf("refusals %s = %d, want %d (all: %v)", r, n, want[r], w.Refusals())
		}
	}
}

// A Redis writer copies a finished task's message, waits until asynq's
// retained copy expires (simulated as asynq's janitor does it: the task's
// hash and its entry in the completed set deleted) and puts the message
// back into the pending list: the worker does not run the tick again. It
// records the refusal in the history (the run's own record stays ok),
// counts it, and archives the copy.
func TestTaskPutBackAfterItsRetentionIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := newFakeExec(nil)
	cfg, w := admitWorker(t, e, exec)
	ctx := context.Background()
	tick := worktest.TickOf("job", 1)
	e.dispatch(t, cfg, tick)
	worktest.Recv(t, exec.started, "the run")
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)

	putBack(t, e, tick)

	info := e.State(t, "baton:default", tick, asynq.TaskStateArchived)
	if !strings.Contains(info.LastErr, "ended already") {
		t.Errorf("archived with %q, want the tick's task ended already", info.LastErr)
	}
	worktest.None(t, exec.started, 200*time.Millisecond, "a second run of the tick")
	rec := refusedRecord(t, e, "job", tick)
	if !strings.Contains(rec.Reason, "ended already") {
		t.Errorf("refused record %+v: want the reason", rec)
	}
	recs, _ := history.Read(ctx, e.RDB, "baton", "job", 0)
	if ok := len(recs) == 2 && (recs[0].Status == jobs.StatusOK || recs[1].Status == jobs.StatusOK); !ok {
		t.Errorf("history %+v: want the run's ok record beside the refusal", recs)
	}
	wantRefusals(t, w, map[RefusalReason]uint64{RefusedDone: 1})
	if st := w.Stats(); st.Ran != 1 {
		t.Errorf("stats %+v: want 1 run", st)
	}
}

// putBack copies tick's completed task's message, lets asynq's retained
// copy expire (as asynq's janitor does: the task's hash and its entry in
// the completed set deleted) and puts the copy back into the pending list,
// as asynq's enqueue writes a task.
func putBack(t *testing.T, e *env, tick scheduler.Tick) {
	t.Helper()
	ctx := context.Background()
	key := handoff.AsynqTaskKey("baton:default", tick.ID())
	msg, err := e.RDB.HGet(ctx, key, "msg").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.RDB.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.RDB.ZRem(ctx, "asynq:{baton:default}:completed", tick.ID()).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Insp.GetTaskInfo("baton:default", tick.ID()); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Fatalf("the retained task is still there: %v", err)
	}
	if err := e.RDB.HSet(ctx, key, "msg", msg, "state", "pending", "pending_since", time.Now().UnixNano()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := e.RDB.LPush(ctx, "asynq:{baton:default}:pending", tick.ID()).Err(); err != nil {
		t.Fatal(err)
	}
}

// The tick's ledger record lasts its task's window by elapsed time, not by
// the worker's clock read on the queue Redis's: with the queue Redis's
// clock ten minutes ahead of the replicas' (slewed, never stepped, but
// set apart), a finished task's copy put back within its window is still
// refused, not run again.
func TestTaskPutBackIsRefusedWhileTheQueueRedisClockIsAhead(t *testing.T) {
	t.Parallel()
	clock := redistest.NewTestClock(t)
	e := newEnv(t, redistest.WithClock(clock))
	if err := clock.Step(10 * time.Minute); err != nil {
		t.Fatal(err)
	}
	exec := newFakeExec(nil)
	cfg := e.signedConfig(t, []string{keyA}, false, `  - name: timed
    schedule: "@every 1s"
    timeout: 1s
    handler: {name: timed}
`)
	w := e.worker(t, cfg, exec, WithLockMasters([]redis.UniversalClient{e.RDB}))
	tick := worktest.TickOf("timed", 1)
	e.dispatch(t, cfg, tick)
	worktest.Recv(t, exec.started, "the run")
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	putBack(t, e, tick)

	info := e.State(t, "baton:default", tick, asynq.TaskStateArchived)
	if !strings.Contains(info.LastErr, "ended already") {
		t.Errorf("archived with %q, want the tick's task ended already", info.LastErr)
	}
	worktest.None(t, exec.started, 200*time.Millisecond, "a second run of the tick")
	wantRefusals(t, w, map[RefusalReason]uint64{RefusedDone: 1})
}

// A task signed when its tick was dispatched, six hours ago, and put into
// the queue now (its tick's ledger record long gone) is past its signed
// expiry: refused as too old, not run.
func TestTaskSignedLongAgoIsRefusedAsTooOld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := newFakeExec(nil)
	cfg, w := admitWorker(t, e, exec)
	job, _ := cfg.Job("job")
	at := time.Now().UTC().Truncate(time.Second).Add(-6 * time.Hour)
	tick := scheduler.Tick{Job: "job", At: at, RunID: "run-old", Replica: "sched-1"}
	task, err := handoff.NewRunTaskAt(cfg, job, tick, at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	info := e.State(t, "baton:default", tick, asynq.TaskStateArchived)
	if !strings.Contains(info.LastErr, "too old to run") {
		t.Errorf("archived with %q, want too old", info.LastErr)
	}
	worktest.None(t, exec.started, 200*time.Millisecond, "a run of the old tick")
	refusedRecord(t, e, "job", tick)
	wantRefusals(t, w, map[RefusalReason]uint64{RefusedTooOld: 1})
}

// A scheduled task of a job whose pause flag the lock masters hold is
// refused (recorded, archived); a trigger of the paused job runs, as the
// trigger is explicit.
func TestPausedJobsTaskIsRefusedAndItsTriggerRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := newFakeExec(nil)
	cfg, w := admitWorker(t, e, exec)
	if err := e.RDB.Set(context.Background(), scheduler.PauseKey("baton", "job"), `{"by":"test"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	tick := worktest.TickOf("job", 2)
	e.dispatch(t, cfg, tick)
	info := e.State(t, "baton:default", tick, asynq.TaskStateArchived)
	if !strings.Contains(info.LastErr, "paused") {
		t.Errorf("archived with %q, want paused", info.LastErr)
	}
	worktest.None(t, exec.started, 200*time.Millisecond, "a run of the paused job")
	if rec := refusedRecord(t, e, "job", tick); rec.Reason != "the job is paused" {
		t.Errorf("refused record %+v", rec)
	}
	wantRefusals(t, w, map[RefusalReason]uint64{RefusedPaused: 1})

	manual := worktest.TickOf("job", 3)
	manual.Manual = true
	e.dispatch(t, cfg, manual)
	if s := worktest.Recv(t, exec.started, "the trigger's run"); s.run.RunID != manual.RunID {
		t.Errorf("ran %+v, want the trigger", s.run)
	}
}

// A task whose first attempt failed is retried within its window and runs;
// once it succeeded, its tick's ledger record says done.
func TestRetriedTaskWithinItsWindowRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := newFakeExec(func(_ context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Attempt == 1 {
			return errors.New("boom")
		}
		return nil
	})
	cfg, w := admitWorker(t, e, exec)
	tick := worktest.TickOf("job", 4)
	e.dispatch(t, cfg, tick)
	for want := 1; want <= 2; want++ {
		if s := worktest.Recv(t, exec.started, "attempt "+strconv.Itoa(want)); s.run.Attempt != want {
			t.Errorf("attempt %d, want %d", s.run.Attempt, want)
		}
	}
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	wantRefusals(t, w, nil)
	var done bool
	if !poll.Until(worktest.Wait, func() bool {
		done, _, _ = readTickRecord(context.Background(), e.RDB, "baton", tick)
		return done
	}) {
		t.Error("the tick's ledger record does not say done after its run")
	}
}

// Under forbid, a retry of a tick that comes after a newer tick of the job
// (asynq's retry of a dead worker's task comes a lease and a recovery
// later) does not take the job from the newest tick: it is skipped, with
// its record naming the newer tick.
func TestStaleRetryDoesNotDisplaceANewerTick(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := newFakeExec(func(_ context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Attempt == 1 && run.Tick.Equal(worktest.TickOf("job", 4).At) {
			return errors.New("boom")
		}
		return nil
	})
	cfg, _ := admitWorker(t, e, exec)
	newer, older := worktest.TickOf("job", 5), worktest.TickOf("job", 4)
	e.dispatch(t, cfg, newer)
	worktest.Recv(t, exec.started, "the newer tick's run")
	worktest.Recv(t, exec.ended, "the newer tick's end")
	e.dispatch(t, cfg, older)
	if s := worktest.Recv(t, exec.started, "the older tick's first attempt"); !s.run.Tick.Equal(older.At) {
		t.Fatalf("ran %v, want the older tick", s.run.Tick)
	}
	worktest.None(t, exec.started, 500*time.Millisecond, "the older tick's retry")
	poll.Require(t, worktest.Wait, "the retry's skipped record", func() bool {
		recs, _ := history.Read(context.Background(), e.RDB, "baton", "job", 0)
		for _, r := range recs {
			if r.Tick.Equal(older.At) && r.Status == jobs.StatusSkipped && r.Attempt == 2 &&
				strings.Contains(r.Reason, "a retry of an older tick: the tick of "+newer.At.UTC().Format(time.RFC3339)+" came before it") {
				return true
			}
		}
		return false
	})
}

// A scheduled task of a tick before the job's start, or after the job ran
// its max_runs ticks (a tick not counted, later than every counted one), is
// refused; a counted tick of the same job runs.
func TestTaskPastTheJobsLimitsIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := newFakeExec(nil)
	cfg, w := admitWorker(t, e, exec)
	ctx := context.Background()
	early := worktest.TickOf("later", 5)
	e.dispatch(t, cfg, early)
	if info := e.State(t, "baton:default", early, asynq.TaskStateArchived); !strings.Contains(info.LastErr, "before the job's start") {
		t.Errorf("archived with %q", info.LastErr)
	}

	capped, _ := cfg.Job("capped")
	counted, extra := worktest.TickOf("capped", 6), worktest.TickOf("capped", 8)
	keys := handoff.RunCountKeys("baton", "capped")
	if err := e.RDB.Set(ctx, keys[0], 2, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []scheduler.Tick{worktest.TickOf("capped", 5), counted} {
		if err := e.RDB.ZAdd(ctx, keys[1], redis.Z{Score: float64(tk.At.UnixMilli()), Member: tk.ID()}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range []scheduler.Tick{counted, extra} {
		// enqueued as a replica whose list has no max_runs would
		task, err := handoff.NewRunTask(cfg, capped, tk)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Enqueue(task); err != nil {
			t.Fatal(err)
		}
	}
	if s := worktest.Recv(t, exec.started, "the counted tick's run"); !s.run.Tick.Equal(counted.At) {
		t.Errorf("ran %s, want the counted tick %s", s.run.Tick, counted.At)
	}
	if info := e.State(t, "baton:default", extra, asynq.TaskStateArchived); !strings.Contains(info.LastErr, "max_runs") {
		t.Errorf("archived with %q", info.LastErr)
	}
	worktest.None(t, exec.started, 200*time.Millisecond, "a run past the job's limits")
	refusedRecord(t, e, "capped", extra)
	wantRefusals(t, w, map[RefusalReason]uint64{RefusedOutsideWindow: 1, RefusedJobDone: 1})
}

// The bound of a task's start is the job's starting deadline plus the
// whole retry budget: every attempt's timeout, slack and shutdown grace,
// and the backoffs between them. A payload without a signed expiry (an
// older dispatcher) is bounded by its tick; a signed one by its expiry.
func TestTickBoundIsTheRetryBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: job
    schedule: "@every 1m"
    timeout: 1m
    max_retry: 2
    retry_backoff: 10s
    starting_deadline: 2m
    handler: {name: job}
`, "{shutdown_grace: 30s}")
	job, _ := cfg.Job("job")
	// 2 x 500ms skew + backoffs 10s + 20s + 3 x (1m + 2m + 30s)
	want := time.Second + 30*time.Second + 3*(time.Minute+handoff.AttemptSlack+30*time.Second)
	if got := handoff.RunWindow(cfg, job); got != want {
		t.Errorf("runWindow = %s, want %s", got, want)
	}
	if got := handoff.TickBound(cfg, job); got != 2*time.Minute+want {
		t.Errorf("tickBound = %s, want %s", got, 2*time.Minute+want)
	}
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	tick := scheduler.Tick{Job: "job", At: at}
	if got := expiryOf(cfg, job, tick, 0); !got.Equal(at.Add(handoff.TickBound(cfg, job))) {
		t.Errorf("expiry without a signed one = %s", got)
	}
	exp := at.Add(time.Hour).UnixMilli()
	if got := expiryOf(cfg, job, tick, exp); got.UnixMilli() != exp {
		t.Errorf("expiry with a signed one = %s", got)
	}
	if got := handoff.TaskExpiry(cfg, job, tick, at.Add(time.Minute)); got != at.Add(time.Minute+want).UnixMilli() {
		t.Errorf("taskExpiry = %d", got)
	}
	forever := *job // a Go program's job without a timeout
	forever.Timeout = 0
	if got := expiryOf(cfg, &forever, tick, handoff.TaskExpiry(cfg, &forever, tick, at)); !got.IsZero() {
		t.Errorf("a job without a timeout has no bound, got %s", got)
	}
}

// During a rolling deploy, a limit of this replica's job list (a start in
// the future) does not refuse a task while a live replica's list defines
// the job differently (without the start): the task is handed back and the
// other replica runs it.
func TestListLimitHandsBackWhileALiveListDiffers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	newer := e.signedConfig(t, []string{keyA}, false, `  - name: later
    schedule: "@every 1s"
    handler: {name: later}
`)
	ran := newFakeExec(nil)
	e.worker(t, newer, ran, WithReplica("newer"))
	older := newFakeExec(nil)
	cfg, w := admitWorker(t, e, older) // its "later" starts in 2100
	tick := worktest.TickOf("later", 7)
	e.dispatch(t, cfg, tick)
	if s := worktest.Recv(t, ran.started, "the run on the replica whose list has no start"); !s.run.Tick.Equal(tick.At) {
		t.Errorf("ran %+v", s.run)
	}
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	worktest.None(t, older.started, 100*time.Millisecond, "a run on the replica whose list refuses it")
	wantRefusals(t, w, nil)
}

// A run count toward max_runs that is no integer from 0 to 2^53-2 (a
// negative one, one with a sign or leading zeros, one beyond 2^53) is
// reported as corrupt, naming the key, when a task's admission reads it,
// never read as a count below the limit.
func TestCorruptMaxRunsCountIsReportedAtAdmission(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"-5", "+1", "01", "9007199254740993"} {
		t.Run(v, func(t *testing.T) {
			e := newEnv(t)
			exec := newFakeExec(nil)
			cfg := e.signedConfig(t, []string{keyA}, false, admitJobs)
			logs := &worktest.Logs{}
			e.worker(t, cfg, exec, WithLockMasters([]redis.UniversalClient{e.RDB}), WithLogger(logs.Logger()))
			keys := handoff.RunCountKeys("baton", "capped")
			if err := e.RDB.Set(context.Background(), keys[0], v, 0).Err(); err != nil {
				t.Fatal(err)
			}
			capped, _ := cfg.Job("capped")
			task, err := handoff.NewRunTask(cfg, capped, worktest.TickOf("capped", 9))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Client.Enqueue(task); err != nil {
				t.Fatal(err)
			}
			worktest.Recv(t, exec.started, "the run (a count that cannot be read does not hold a task back)")
			if out := logs.String(); !strings.Contains(out, "corrupt") || !strings.Contains(out, keys[0]) {
				t.Errorf("a run count %q was read without a report naming %s", v, keys[0])
			}
		})
	}
}

// A rolling deploy changes a job's schedule (@every 1m -> @every 2m): a tick
// the old schedule had, dispatched by a replica that still has it, runs on
// a worker with the new one.
func TestTickOfAChangedScheduleRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.Config(t, "  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n")
	cur := e.Config(t, "  - name: job\n    schedule: \"@every 2m\"\n    handler: {name: job}\n")
	tk := worktest.TickOf("job", 1) // 00:01: a tick of @every 1m, not of @every 2m
	e.dispatch(t, old, tk)          // the old replica's dispatch (tick recorded done)
	exec := newFakeExec(nil)
	e.worker(t, cur, exec) // the new replica's worker fetches it
	select {
	case <-exec.started:
	case <-time.After(5 * time.Second):
		info, _ := e.Insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("a tick dispatched under the old schedule never ran; task: %s %q", info.State, info.LastErr)
	}
}

// The same for a job moved from UTC to Europe/Berlin.
func TestTickOfAChangedTimezoneRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.Config(t, "  - name: job\n    schedule: \"0 3 * * *\"\n    handler: {name: job}\n")
	cur := e.Config(t, "  - name: job\n    schedule: \"0 3 * * *\"\n    timezone: Europe/Berlin\n    handler: {name: job}\n")
	tk := scheduler.Tick{Job: "job", At: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), RunID: "run-tz", Replica: "old"}
	e.dispatch(t, old, tk)
	exec := newFakeExec(nil)
	e.worker(t, cur, exec)
	select {
	case <-exec.started:
	case <-time.After(5 * time.Second):
		info, _ := e.Insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("a tick dispatched under the old time zone never ran; task: %s %q", info.State, info.LastErr)
	}
}

// A worker whose clock is behind Redis sees on-time ticks in the future: they
// wait (handed back) instead of being archived.
func TestWorkerClockBehindLosesNoTick(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, "  - name: job\n    schedule: \"@every 1s\"\n    handler: {name: job}\n")
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	at := time.Now().Truncate(time.Second).Add(4 * time.Second)
	tk := scheduler.Tick{Job: "job", At: at.UTC(), RunID: "run-skew", Replica: "sched"}
	e.dispatch(t, cfg, tk)
	select {
	case <-exec.started:
	case <-time.After(8 * time.Second):
		info, _ := e.Insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("an on-time tick seen by a worker 4s behind never ran; task: %s %q", info.State, info.LastErr)
	}
}

// A task of a runtime schedule's tick from before the schedule was put (a
// tick of a schedule deleted since, whose id was put again) does not run
// under the new definition: it is refused, and archived.
func TestTaskOfATickBeforeItsRuntimeScheduleWasPutIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := e.Config(t, "  []")
	created := worktest.TickBase.Add(30 * time.Second)
	j, err := config.DecodeSchedule(base, "report/x", []byte(`{schedule: "@every 1s", handler: {name: report}}`), created)
	if err != nil {
		t.Fatal(err)
	}
	cfg := base.WithSource(scheduleSource{j.Name: j})
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec, WithHandlers(registry(t, "report")))
	old, current := scheduleTick("@report/x", 10), scheduleTick("@report/x", 31)
	e.dispatch(t, cfg, old)
	if info := e.State(t, runtimeQueue, old, asynq.TaskStateArchived); !strings.Contains(info.LastErr, "before its runtime schedule was put") {
		t.Errorf("archived with %q", info.LastErr)
	}
	e.dispatch(t, cfg, current)
	if s := worktest.Recv(t, exec.started, "the current tick's run"); !s.run.Tick.Equal(current.At) {
		t.Errorf("ran %s, want %s", s.run.Tick, current.At)
	}
	worktest.None(t, exec.started, 100*time.Millisecond, "a run of the older tick")
}

// With the queue Redis as the only lock master, admission reads the tick's
// ledger record and the job's pause flag in one round trip, and a task of a
// paused job is still refused.
func TestAdmissionReadsLedgerAndPauseInOneRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := &tripLog{}
	exec := newFakeExec(nil)
	cfg := e.signedConfig(t, []string{keyA}, false, admitJobs)
	w := e.workerOn(t, hookedOpt{e.Opt, l}, cfg, exec, WithLockMasters([]redis.UniversalClient{e.RDB}), WithQueueAsLockMaster())
	tick := worktest.TickOf("job", 6)
	e.dispatch(t, cfg, tick)
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	trip := tripTo(t, l, "get "+tickRecordKey("baton", tick))
	if !carries(trip, "exists "+scheduler.PauseKey("baton", "job")) {
		t.Errorf("the ledger record was read in %v, without the pause flag", trip)
	}

	if err := e.RDB.Set(context.Background(), scheduler.PauseKey("baton", "job"), `{"by":"test"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	paused := worktest.TickOf("job", 7)
	e.dispatch(t, cfg, paused)
	if info := e.State(t, "baton:default", paused, asynq.TaskStateArchived); !strings.Contains(info.LastErr, "paused") {
		t.Errorf("archived with %q, want paused", info.LastErr)
	}
	wantRefusals(t, w, map[RefusalReason]uint64{RefusedPaused: 1})
}

// admissionTopologies are the two ways admission reads the pause flag: from
// the lock masters apart, and with the ledger record where the queue Redis
// is the only lock master.
var admissionTopologies = []struct {
	name string
	opts func(e *env) []Option
}{
	{"the queue Redis as a separate lock master", func(e *env) []Option {
		return []Option{WithLockMasters([]redis.UniversalClient{e.RDB})}
	}},
	{"the queue Redis as the only lock master", func(e *env) []Option {
		return []Option{WithLockMasters([]redis.UniversalClient{e.RDB}), WithQueueAsLockMaster()}
	}},
}

// A job's pause flag is a key whose presence pauses the job
// (scheduler.PauseKey): the claim and a quorum of lock masters take any
// key there, of whatever type, as a pause. Schedule: a tick is dispatched;
// before its task runs, something writes the flag as a key of another type
// (a hash); admission refuses the task as paused whatever the topology,
// also where the queue Redis is the only lock master and the flag is read
// in the round trip of the ledger record.
func TestPauseFlagOfAnotherTypeRefusesTheTask(t *testing.T) {
	t.Parallel()
	for _, tc := range admissionTopologies {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			exec := newFakeExec(nil)
			cfg := e.signedConfig(t, []string{keyA}, false, admitJobs)
			w := e.worker(t, cfg, exec, tc.opts(e)...)
			if err := e.RDB.HSet(context.Background(), scheduler.PauseKey("baton", "job"), "by", "test").Err(); err != nil {
				t.Fatal(err)
			}
			tick := worktest.TickOf("job", 7)
			e.dispatch(t, cfg, tick)
			var info *asynq.TaskInfo
			poll.Require(t, worktest.Wait, "the task archived or completed", func() bool {
				i, err := e.Insp.GetTaskInfo("baton:default", tick.ID())
				info = i
				return err == nil && (i.State == asynq.TaskStateArchived || i.State == asynq.TaskStateCompleted)
			})
			if info.State != asynq.TaskStateArchived || !strings.Contains(info.LastErr, "paused") {
				t.Errorf("a task of a job whose pause flag is a hash ended %s with %q, want refused as paused", info.State, info.LastErr)
			}
			wantRefusals(t, w, map[RefusalReason]uint64{RefusedPaused: 1})
		})
	}
}

// A tick's ledger record that is no string (baton writes "done:<run id>")
// cannot say whether the tick's task ended: admission runs the task and
// says so in the log, whatever the topology.
func TestLedgerRecordOfAnotherTypeIsReportedAtAdmission(t *testing.T) {
	t.Parallel()
	for _, tc := range admissionTopologies {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			exec := newFakeExec(nil)
			cfg := e.signedConfig(t, []string{keyA}, false, admitJobs)
			logs := &worktest.Logs{}
			e.worker(t, cfg, exec, append(tc.opts(e), WithLogger(logs.Logger()))...)
			tick := worktest.TickOf("job", 8)
			if err := e.RDB.HSet(context.Background(), tickRecordKey("baton", tick), "f", "v").Err(); err != nil {
				t.Fatal(err)
			}
			e.dispatch(t, cfg, tick)
			worktest.Recv(t, exec.started, "the run (a record that cannot be read does not hold a task back)")
			if logs.Count("cannot read the tick's ledger record") == 0 {
				t.Errorf("a ledger record of another type at %s was passed over without a word; log:\n%s", tickRecordKey("baton", tick), logs.String())
			}
		})
	}
}

// Under forbid, a retry of a tick runs when the newer tick of the job did
// not run: that tick was skipped because this tick's first attempt held the
// job. Skipping the retry too would leave the job with no run of either.
func TestRetryRunsWhenTheNewerTickDidNotRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gate := make(chan struct{})
	older, newer := worktest.TickOf("job", 4), worktest.TickOf("job", 5)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Attempt == 1 && run.Tick.Equal(older.At) {
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return errors.New("boom")
		}
		return nil
	})
	cfg, _ := admitWorker(t, e, exec)
	e.dispatch(t, cfg, older)
	worktest.Recv(t, exec.started, "the older tick's first attempt")
	e.dispatch(t, cfg, newer)
	poll.Require(t, worktest.Wait, "the newer tick's skipped record", func() bool {
		recs, _ := history.Read(context.Background(), e.RDB, "baton", "job", 0)
		for _, r := range recs {
			if r.Tick.Equal(newer.At) && r.Status == jobs.StatusSkipped {
				return true
			}
		}
		return false
	})
	close(gate)
	worktest.Recv(t, exec.ended, "the older tick's first attempt's end")
	if s := worktest.Recv(t, exec.started, "the older tick's retry"); !s.run.Tick.Equal(older.At) || s.run.Attempt != 2 {
		t.Fatalf("ran %v attempt %d, want the older tick's retry", s.run.Tick, s.run.Attempt)
	}
}

// A retry of a task whose earlier attempt ended (on a starved host it ran
// to its end after asynq's deadline for it, and asynq had scheduled the
// retry meanwhile: the tick's ledger record names this task's run) is not
// refused as a copy put back: it completes, with no run and no refused
// record.
func TestARetryAfterAnAttemptThatEndedLateCompletesWithoutARecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tick := worktest.TickOf("job", 1)
	var first atomic.Bool
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if !first.CompareAndSwap(false, true) {
			return nil
		}
		// the attempt ends (ok, its ledger record written) while asynq
		// already took it for failed at its deadline
		if err := e.RDB.Set(ctx, tickRecordKey("baton", tick), doneMarker+":"+run.RunID, time.Minute).Err(); err != nil {
			return err
		}
		return errors.New("asynq's deadline passed")
	})
	logs := &worktest.Logs{}
	cfg, _ := admitWorkerLogged(t, e, exec, logs)
	e.dispatch(t, cfg, tick)
	worktest.Recv(t, exec.started, "the first attempt")
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	worktest.None(t, exec.started, 100*time.Millisecond, "a run of the retry")
	recs, _ := history.Read(context.Background(), e.RDB, "baton", "job", 0)
	for _, r := range recs {
		if r.Status == jobs.StatusRefused {
			t.Errorf("a refused record: %+v", r)
		}
	}
	if logs.Count("a retry of a task whose earlier attempt ended after asynq's deadline") != 1 || logs.Count("put back into the queue") != 0 {
		t.Errorf("logs:\n%s", logs.String())
	}
}
