package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/schedstore"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// order keeps the runs' starts and ends in the order they happened.
type order struct {
	mu     sync.Mutex
	events []string
}

func (o *order) add(s string) {
	o.mu.Lock()
	o.events = append(o.events, s)
	o.mu.Unlock()
}

func (o *order) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.events, " ")
}

// A chained tick dispatched before its parent's waits, handed back without
// spending an attempt, until the parent's tick succeeded; then it runs,
// once, after it.
func TestAChainedTickWaitsForItsParentAndRunsAfterItSucceeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    handler: {name: extract}
  - name: load
    after: [extract]
    handler: {name: load}
`)
	var o order
	gate := make(chan struct{})
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		o.add(run.Job + "-start")
		if run.Job == "extract" {
			<-gate
		}
		o.add(run.Job + "-end")
		return nil
	})
	e.worker(t, cfg, exec)
	now := time.Now().UTC().Truncate(time.Second)
	te, tl := tickAt("extract", now), tickAt("load", now)
	e.dispatch(t, cfg, tl)
	none(t, exec.started, 300*time.Millisecond, "load's run before extract's tick ended")
	e.dispatch(t, cfg, te)
	worktest.Recv(t, exec.started, "extract's run")
	none(t, exec.started, 300*time.Millisecond, "load's run while extract runs")
	close(gate)
	if s := worktest.Recv(t, exec.started, "load's run"); s.run.Job != "load" || !s.run.Tick.Equal(tl.At) || s.run.Attempt != 1 {
		t.Fatalf("ran %+v", s.run)
	}
	info := e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
	if info.Retried != 0 {
		t.Errorf("load's task spent %d attempts waiting", info.Retried)
	}
	if got := o.String(); got != "extract-start extract-end load-start load-end" {
		t.Errorf("runs in the order %q", got)
	}
	none(t, exec.started, 300*time.Millisecond, "a second run of load")
}

// A chained tick whose parent's tick failed for good is skipped, naming the
// parent and why (on_parent_failure: skip, the default); with
// on_parent_failure: run it runs all the same.
func TestAChainedTickIsSkippedWhenItsParentFailedUnlessItRunsAnyway(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    max_retry: 0
    handler: {name: extract}
  - name: load
    after: [extract]
    handler: {name: load}
  - name: notify
    after: [extract]
    on_parent_failure: run
    handler: {name: notify}
`)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Job == "extract" {
			return errors.New("the source is down")
		}
		return nil
	})
	e.worker(t, cfg, exec)
	now := time.Now().UTC().Truncate(time.Second)
	te := tickAt("extract", now)
	tl, tn := tickAt("load", now), tickAt("notify", now)
	e.dispatch(t, cfg, te)
	e.dispatch(t, cfg, tl)
	e.dispatch(t, cfg, tn)
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
	r := recordOf(t, e, tl)
	if r == nil || r.Status != jobs.StatusSkipped || !strings.HasPrefix(r.Reason, "extract@"+te.At.UTC().Format(time.RFC3339)+" failed: ") ||
		!strings.Contains(r.Reason, "the source is down") {
		t.Errorf("load's tick recorded %+v, want skipped naming extract's failure", r)
	}
	e.State(t, "baton:default", tn, asynq.TaskStateCompleted)
	if r := recordOf(t, e, tn); r == nil || r.Status != jobs.StatusOK {
		t.Errorf("notify's tick recorded %+v, want it run after extract failed (on_parent_failure: run)", r)
	}
	// load, which others could run after, is skipped once only
	if n := countRuns(exec, "load"); n != 0 {
		t.Errorf("load ran %d times", n)
	}
}

// countRuns drains exec's starts and counts job's.
func countRuns(exec *fakeExec, job string) int {
	n := 0
	for {
		select {
		case s := <-exec.started:
			if s.run.Job == job {
				n++
			}
		default:
			return n
		}
	}
}

// Fan-in: a tick of a job run after two others runs once both parents
// with a tick at that instant succeeded, not after the first.
func TestAChainedTickRunsOnceEveryParentWithThatTickSucceeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: a
    schedule: "@every 1s"
    handler: {name: a}
  - name: b
    schedule: "@every 1s"
    handler: {name: b}
  - name: join
    after: [a, b]
    handler: {name: join}
`)
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	now := time.Now().UTC().Truncate(time.Second)
	e.dispatch(t, cfg, tickAt("join", now))
	e.dispatch(t, cfg, tickAt("a", now))
	worktest.Recv(t, exec.started, "a's run")
	e.State(t, "baton:default", tickAt("a", now), asynq.TaskStateCompleted)
	none(t, exec.started, 500*time.Millisecond, "join's run with b's tick not ended")
	e.dispatch(t, cfg, tickAt("b", now))
	worktest.Recv(t, exec.started, "b's run")
	if s := worktest.Recv(t, exec.started, "join's run"); s.run.Job != "join" {
		t.Fatalf("ran %+v", s.run)
	}
}

// A parent's tick that no worker ends (never dispatched, its record lost)
// holds its child's tick until the child's starting deadline, by the
// worker's clock; then the child's tick is skipped, saying which parent it
// waited for.
func TestAChainedTickWhoseParentNeverEndsIsSkippedAtItsStartingDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    handler: {name: extract}
  - name: load
    after: [extract]
    starting_deadline: 10m
    handler: {name: load}
`)
	exec := newFakeExec(nil)
	tl := tickAt("load", time.Now().UTC().Truncate(time.Second))
	clk := clock.NewFake(tl.At)
	e.worker(t, cfg, exec, WithClock(clk))
	e.dispatch(t, cfg, tl)
	none(t, exec.started, 500*time.Millisecond, "load's run without extract's tick")
	clk.Advance(10 * time.Minute)
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
	r := recordOf(t, e, tl)
	if r == nil || r.Status != jobs.StatusSkipped || !strings.Contains(r.Reason, "did not end their ticks within its starting_deadline (10m0s): extract@") {
		t.Errorf("load's tick recorded %+v", r)
	}
}

// The outcome of a tick of a job that others run after is recorded where
// its task ends for good: ok with the run's end, the status and why for a
// tick that did not succeed; a job nobody runs after records none.
func TestAParentsTickRecordsItsOutcomeWhereItsTaskEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    max_retry: 0
    handler: {name: extract}
  - name: load
    after: [extract]
    handler: {name: load}
  - name: alone
    schedule: "@every 1s"
    handler: {name: alone}
`)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Job == "extract" && run.Tick.Equal(worktest.TickOf("extract", 2).At) {
			return errors.New("boom")
		}
		return nil
	})
	e.worker(t, cfg, exec)
	for n := 1; n <= 2; n++ { // one after the other: forbid skips a tick that finds the job running
		e.dispatch(t, cfg, worktest.TickOf("extract", n))
		e.dispatch(t, cfg, worktest.TickOf("alone", n))
		ended := asynq.TaskStateCompleted
		if n == 2 {
			ended = asynq.TaskStateArchived // failed, max_retry 0
		}
		e.State(t, "baton:default", worktest.TickOf("extract", n), ended)
		e.State(t, "baton:default", worktest.TickOf("alone", n), asynq.TaskStateCompleted)
	}
	ctx := context.Background()
	var outs map[string]chain.Outcome
	poll.Require(t, worktest.Wait, "extract's outcomes", func() bool {
		o1, _ := chain.Read(ctx, e.RDB, "baton", []string{"extract"}, worktest.TickOf("extract", 1).At)
		o2, _ := chain.Read(ctx, e.RDB, "baton", []string{"extract"}, worktest.TickOf("extract", 2).At)
		outs = map[string]chain.Outcome{"1": o1["extract"], "2": o2["extract"]}
		return o1["extract"].Status != "" && o2["extract"].Status != ""
	})
	if !outs["1"].OK() || outs["2"].Status != jobs.StatusFailed || !strings.Contains(outs["2"].Reason, "boom") {
		t.Errorf("outcomes %+v", outs)
	}
	e.State(t, "baton:default", worktest.TickOf("alone", 2), asynq.TaskStateCompleted)
	if n := e.RDB.Exists(ctx, chain.Key("baton", "alone", worktest.TickOf("alone", 1).At)).Val(); n != 0 {
		t.Errorf("alone, which no job runs after, recorded an outcome")
	}
}

// A copy of a parent's task put back into the queue after its tick ran
// and succeeded is refused (ended already), and that refusal is not the
// tick's outcome: the child's tick, dispatched after it, still runs.
func TestACopyOfAParentsEndedTaskDoesNotUndoItsSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    handler: {name: extract}
  - name: load
    after: [extract]
    handler: {name: load}
`)
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	now := time.Now().UTC().Truncate(time.Second)
	te, tl := tickAt("extract", now), tickAt("load", now)
	e.dispatch(t, cfg, te)
	worktest.Recv(t, exec.started, "extract's run")
	e.State(t, "baton:default", te, asynq.TaskStateCompleted)
	putBack(t, e, te)
	e.State(t, "baton:default", te, asynq.TaskStateArchived) // refused: ended already
	e.dispatch(t, cfg, tl)
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
	if r := recordOf(t, e, tl); r == nil || r.Status != jobs.StatusOK {
		t.Errorf("load's tick recorded %+v, want it run after extract's tick succeeded", r)
	}
}

// A duplicate local dispatch of a parent's tick that is running is skipped,
// and that skip is not the tick's outcome: the child's tick waits for the
// running parent's end and runs after it.
func TestADuplicateLocalDispatchOfARunningParentDoesNotSkipItsChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    mode: local
    handler: {name: extract}
  - name: load
    after: [extract]
    handler: {name: load}
`)
	gate := make(chan struct{})
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, v executor.Validity) error {
		if run.Job == "extract" {
			return blockUntil(gate)(ctx, run, v)
		}
		return nil
	})
	w := e.worker(t, cfg, exec)
	job, _ := cfg.Job("extract")
	now := time.Now().UTC().Truncate(time.Second)
	te, tl := tickAt("extract", now), tickAt("load", now)
	if err := w.RunLocal(context.Background(), job, te); err != nil {
		t.Fatal(err)
	}
	worktest.Recv(t, exec.started, "extract's run")
	if err := w.RunLocal(context.Background(), job, te); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, worktest.Wait, "the duplicate to be skipped", func() bool { return w.Stats().Skipped == 1 })
	e.dispatch(t, cfg, tl)
	none(t, exec.started, 500*time.Millisecond, "load's run while extract runs")
	close(gate)
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
	if r := recordOf(t, e, tl); r == nil || r.Status != jobs.StatusOK {
		t.Errorf("load's tick recorded %+v, want it run after extract's tick succeeded", r)
	}
}

// A chained tick's wait for its parents is not its run: a parent that runs
// longer than the child's own retry window (its timeout and retries), but
// ends within the child's starting deadline, is followed by the child's
// run, not by a refusal of its task as too old.
func TestAChainedTickWhoseParentRunsLongerThanItsRunWindowRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    handler: {name: extract}
  - name: load
    after: [extract]
    timeout: 1m
    max_retry: 0
    starting_deadline: 30m
    handler: {name: load}
`)
	gate := make(chan struct{})
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, v executor.Validity) error {
		if run.Job == "extract" {
			return blockUntil(gate)(ctx, run, v)
		}
		return nil
	})
	clk := clock.NewFake(time.Now())
	e.worker(t, cfg, exec, WithClock(clk))
	now := time.Now().UTC().Truncate(time.Second)
	te, tl := tickAt("extract", now), tickAt("load", now)
	e.dispatch(t, cfg, te)
	e.dispatch(t, cfg, tl)
	worktest.Recv(t, exec.started, "extract's run")
	clk.Advance(10 * time.Minute) // extract runs ten minutes
	lookedAgain(t, e, tl)         // load looks at its parents again meanwhile
	close(gate)
	if s := worktest.Recv(t, exec.started, "load's run"); s.run.Job != "load" {
		t.Fatalf("ran %+v", s.run)
	}
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
}

// lookedAgain waits until a chained tick's task, handed back while its
// parents run, is handed back once more by a look at them that began after
// the call: the task is seen waiting, then waiting to be looked at again at
// another time.
func lookedAgain(t *testing.T, e *env, tick scheduler.Tick) {
	t.Helper()
	first := e.State(t, "baton:default", tick, asynq.TaskStateRetry).NextProcessAt
	poll.Require(t, worktest.Wait, "another look at its parents", func() bool {
		info, err := e.Insp.GetTaskInfo("baton:default", tick.ID())
		return err == nil && info.State == asynq.TaskStateRetry && !info.NextProcessAt.Equal(first)
	})
}

// elapse moves the worker's clock d on, and the outcome records' time to
// live with it (as the queue Redis's own clock would): the records d
// outlives expire.
func elapse(t *testing.T, e *env, clk *clock.Fake, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	keys, err := e.RDB.Keys(ctx, "baton:{*}:outcome:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ttl := e.RDB.PTTL(ctx, k).Val()
		switch {
		case ttl < 0: // no expiry
		case ttl <= d:
			e.RDB.Del(ctx, k)
		default:
			e.RDB.PExpire(ctx, k, ttl-d)
		}
	}
	clk.Advance(d)
}

// A retry of a chained tick whose first attempt ran after its parent's
// tick succeeded, and failed, runs: however long that first attempt took
// (up to its timeout), the parent's outcome record still says it
// succeeded, and the retry is not skipped as if the parent never ended.
func TestARetryOfAChainedTickLongAfterItsParentSucceededRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    handler: {name: extract}
  - name: load
    after: [extract]
    timeout: 2h
    max_retry: 1
    retry_backoff: 3s
    handler: {name: load}
`)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, v executor.Validity) error {
		if run.Job == "load" && run.Attempt == 1 {
			return errors.New("the warehouse is full")
		}
		return nil
	})
	clk := clock.NewFake(time.Now())
	e.worker(t, cfg, exec, WithClock(clk))
	now := time.Now().UTC().Truncate(time.Second)
	te, tl := tickAt("extract", now), tickAt("load", now)
	e.dispatch(t, cfg, te)
	e.State(t, "baton:default", te, asynq.TaskStateCompleted)
	e.dispatch(t, cfg, tl)
	worktest.Recv(t, exec.started, "extract's run")
	if s := worktest.Recv(t, exec.started, "load's first attempt"); s.run.Job != "load" {
		t.Fatalf("ran %+v", s.run)
	}
	worktest.Recv(t, exec.ended, "extract's end")
	worktest.Recv(t, exec.ended, "load's first attempt's end")
	elapse(t, e, clk, 90*time.Minute) // the first attempt ran 90 minutes before it failed
	if s := worktest.Recv(t, exec.started, "load's retry"); s.run.Job != "load" || s.run.Attempt != 2 {
		t.Fatalf("ran %+v", s.run)
	}
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
}

// A parent's tick run by a replica whose job list does not have the child
// yet (a rolling deploy that adds it) ends without an outcome record: the
// child's tick waits to its starting deadline, then reads the parent's
// end from its history (TestARuntimeParentsTickOnAReplicaBehindTheChilds
// PutRecordsItsOutcome); when the history no longer holds it either, it
// is skipped saying the parent's tick ended without one, not that it
// never ended.
func TestAChainedTickWhoseParentRanOnAReplicaWithoutTheChainSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    handler: {name: extract}
`)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    handler: {name: extract}
  - name: load
    after: [extract]
    starting_deadline: 10m
    handler: {name: load}
`)
	exec := newFakeExec(nil)
	now := time.Now().UTC().Truncate(time.Second)
	te, tl := tickAt("extract", now), tickAt("load", now)
	w := e.worker(t, old, exec)
	e.dispatch(t, old, te)
	e.State(t, "baton:default", te, asynq.TaskStateCompleted)
	ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	// the parent's history lost (trimmed by its later runs)
	if err := e.RDB.Del(context.Background(), runlog.Key("baton", "extract"), runlog.ListKey("baton", "extract")).Err(); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Now())
	e.worker(t, cfg, exec, WithClock(clk))
	e.dispatch(t, cfg, tl)
	e.State(t, "baton:default", tl, asynq.TaskStateRetry) // load looked at its parent and was handed back
	clk.Advance(10 * time.Minute)
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
	r := recordOf(t, e, tl)
	if r == nil || r.Status != jobs.StatusSkipped || !strings.Contains(r.Reason, "extract@"+te.At.UTC().Format(time.RFC3339)+" ended without an outcome record") {
		t.Errorf("load's tick recorded %+v", r)
	}
}

// A chained tick at an instant none of its parents ticks at by this
// replica's job list (dispatched by a replica whose list gives a parent
// another schedule: a rolling deploy that changes it) still waits for its
// parents' ticks at that instant: it does not run while its parent's tick,
// dispatched by the same replica, runs.
func TestAChainedTickAtNoParentsTickByThisListStillWaitsForItsParents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    handler: {name: extract}
  - name: load
    after: [extract]
    handler: {name: load}
`)
	cfg := e.Config(t, `  - name: extract
    schedule: "0 0 1 1 *"
    handler: {name: extract}
  - name: load
    after: [extract]
    handler: {name: load}
`)
	var o order
	gate := make(chan struct{})
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, v executor.Validity) error {
		o.add(run.Job + "-start")
		if run.Job == "extract" {
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
		o.add(run.Job + "-end")
		return nil
	})
	e.worker(t, cfg, exec)
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	now := time.Now().UTC().Truncate(time.Second)
	te, tl := tickAt("extract", now), tickAt("load", now)
	e.dispatch(t, old, te) // by a replica on the old list
	worktest.Recv(t, exec.started, "extract's run")
	e.dispatch(t, old, tl)
	none(t, exec.started, 500*time.Millisecond, "load's run while extract runs")
	close(gate)
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
	if got := o.String(); got != "extract-start extract-end load-start load-end" {
		t.Errorf("runs in the order %q", got)
	}
}

// A chain of three (a -> b -> c): a's tick failed, so b's is skipped
// naming it, and c's is skipped naming b's skip; neither runs.
func TestAChainOfThreeSkipsTheGrandchildOfAFailedTick(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: a
    schedule: "@every 1s"
    max_retry: 0
    handler: {name: a}
  - name: b
    after: [a]
    handler: {name: b}
  - name: c
    after: [b]
    handler: {name: c}
`)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Job == "a" {
			return errors.New("the source is down")
		}
		return nil
	})
	e.worker(t, cfg, exec)
	now := time.Now().UTC().Truncate(time.Second)
	ta, tb, tc := tickAt("a", now), tickAt("b", now), tickAt("c", now)
	e.dispatch(t, cfg, tc)
	e.dispatch(t, cfg, tb)
	e.dispatch(t, cfg, ta)
	e.State(t, "baton:default", tc, asynq.TaskStateCompleted)
	at := ta.At.UTC().Format(time.RFC3339)
	if r := recordOf(t, e, tb); r == nil || r.Status != jobs.StatusSkipped || !strings.HasPrefix(r.Reason, "a@"+at+" failed: ") {
		t.Errorf("b's tick recorded %+v", r)
	}
	if r := recordOf(t, e, tc); r == nil || r.Status != jobs.StatusSkipped || !strings.HasPrefix(r.Reason, "b@"+at+" skipped: a@"+at+" failed: ") {
		t.Errorf("c's tick recorded %+v", r)
	}
	for len(exec.started) > 0 {
		if s := <-exec.started; s.run.Job != "a" {
			t.Errorf("%s ran", s.run.Job)
		}
	}
}

// A triggered run of a parent is not a tick of its schedule: its end is
// not the outcome of the scheduled tick at the same instant (a trigger
// made on a whole second), and a child's tick there does not follow it.
func TestATriggeredRunOfAParentIsNotTheOutcomeOfItsScheduledTick(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1s"
    max_retry: 0
    handler: {name: extract}
  - name: load
    after: [extract]
    handler: {name: load}
`)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Job == "extract" && run.RunID == "triggered" {
			return errors.New("a bad argument")
		}
		return nil
	})
	e.worker(t, cfg, exec)
	now := time.Now().UTC().Truncate(time.Second)
	te, tl := tickAt("extract", now), tickAt("load", now)
	manual := te
	manual.Manual, manual.RunID = true, "triggered"
	e.dispatch(t, cfg, manual)
	e.State(t, "baton:default", manual, asynq.TaskStateArchived)
	e.dispatch(t, cfg, tl)
	worktest.Recv(t, exec.started, "the trigger's run")
	e.State(t, "baton:default", tl, asynq.TaskStateRetry) // load looked at extract's tick and was handed back
	e.dispatch(t, cfg, te)
	e.State(t, "baton:default", tl, asynq.TaskStateCompleted)
	if r := recordOf(t, e, tl); r == nil || r.Status != jobs.StatusOK {
		t.Errorf("load's tick recorded %+v, want it run after extract's scheduled tick succeeded", r)
	}
}

// tickAt is job's tick at at: chained ticks wait for parents' ticks of
// the same instant, and a waiting tick looks again later the older it is
// (parentPoll): the tests take their ticks now, not at worktest.TickBase.
func tickAt(job string, at time.Time) scheduler.Tick {
	t := worktest.TickOf(job, 1)
	t.At = at
	return t
}

// followerOf is a replica's copy of the runtime schedules in e's store,
// read at the call (not following: Sync reads it again), and base with it
// as its source.
func followerOf(t *testing.T, e *env, base *config.Config) (*schedstore.Follower, *config.Config) {
	t.Helper()
	f := schedstore.NewFollower(schedstore.Of(e.RDB, base), base, nil, schedstore.WithFetch())
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	return f, base.WithSource(f)
}

func putSchedule(t *testing.T, st *schedstore.Store, id, doc string) schedstore.Record {
	t.Helper()
	d, err := config.ScheduleDocument([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.Put(context.Background(), id, d, schedstore.Any)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A runtime schedule put to run after another whose tick then runs on a
// replica whose copy has not read the child's put yet (its stream a
// moment behind: the child was put before the tick, another replica
// dispatched the child's tick): that replica writes no outcome record,
// and the child's tick reads the parent's success from its history at
// its starting deadline and runs, not skipped as though the parent never
// ended.
func TestARuntimeParentsTickOnAReplicaBehindTheChildsPutRecordsItsOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := e.Config(t, "  []")
	st := schedstore.Of(e.RDB, base)
	putSchedule(t, st, "extract", `{schedule: "@every 1s", concurrency: allow, max_retry: 0, handler: {name: extract}}`)
	_, behind := followerOf(t, e, base) // replica A: has not read the child's put yet
	child := putSchedule(t, st, "load", `{after: ["@extract"], concurrency: allow, starting_deadline: 10m, handler: {name: load}}`)
	_, current := followerOf(t, e, base) // replica B: has
	at := child.Created.Truncate(time.Second).Add(time.Second)
	poll.Require(t, worktest.Wait, "the store's clock past the tick", func() bool {
		now, err := e.RDB.Time(ctx).Result()
		return err == nil && now.After(at)
	})
	te := scheduler.Tick{Job: "@extract", At: at, RunID: "run-e", Fence: 1, Replica: "b"}
	tl := scheduler.Tick{Job: "@load", At: at, RunID: "run-l", Fence: 1, Replica: "b"}
	exec := newFakeExec(nil)
	a := e.worker(t, behind, exec, WithReplica("a"), WithHandlers(registry(t, "extract", "load")))
	e.dispatch(t, current, te) // B's scheduler dispatches both ticks
	e.State(t, runtimeQueue, te, asynq.TaskStateCompleted)
	sctx, cancel := context.WithTimeout(ctx, worktest.Wait)
	defer cancel()
	if err := a.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Now())
	e.worker(t, current, exec, WithReplica("b"), WithHandlers(registry(t, "extract", "load")), WithClock(clk))
	e.dispatch(t, current, tl)
	poll.Require(t, worktest.Wait, "@load's task looked at its parent", func() bool {
		info, err := e.Insp.GetTaskInfo(runtimeQueue, tl.ID())
		return err == nil && (info.State == asynq.TaskStateRetry || info.State == asynq.TaskStateCompleted)
	})
	clk.Advance(10 * time.Minute)
	e.State(t, runtimeQueue, tl, asynq.TaskStateCompleted)
	if r := recordOf(t, e, tl); r == nil || r.Status != jobs.StatusOK {
		t.Errorf("@load's tick, whose parent's tick succeeded, recorded %+v", r)
	}
}

// A chained runtime schedule's tick is skipped when a parent's tick at that
// instant failed, even when that parent's schedule is replaced, before the
// child's tick runs, by one without the instant (the child still waiting
// for its other parent): the failed tick was the parent's tick at that
// instant.
func TestAChainedTickIsSkippedAfterItsParentsFailedTickThoughThatParentIsReplacedSince(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := e.Config(t, "  []")
	st := schedstore.Of(e.RDB, base)
	putSchedule(t, st, "extract", `{schedule: "@every 1s", concurrency: allow, max_retry: 0, handler: {name: extract}}`)
	putSchedule(t, st, "fetch", `{schedule: "@every 1s", concurrency: allow, max_retry: 0, handler: {name: fetch}}`)
	child := putSchedule(t, st, "load", `{after: ["@extract", "@fetch"], concurrency: allow, handler: {name: load}}`)
	f, cfg := followerOf(t, e, base)
	at := child.Created.Truncate(time.Second).Add(time.Second)
	poll.Require(t, worktest.Wait, "the store's clock past the tick", func() bool {
		now, err := e.RDB.Time(ctx).Result()
		return err == nil && now.After(at)
	})
	te := scheduler.Tick{Job: "@extract", At: at, RunID: "run-e", Fence: 1, Replica: "s"}
	tf := scheduler.Tick{Job: "@fetch", At: at, RunID: "run-f", Fence: 1, Replica: "s"}
	tl := scheduler.Tick{Job: "@load", At: at, RunID: "run-l", Fence: 1, Replica: "s"}
	gate := make(chan struct{})
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		switch run.Job {
		case "@extract":
			return errors.New("the source is down")
		case "@fetch":
			<-gate
		}
		return nil
	})
	e.worker(t, cfg, exec, WithReplica("w"), WithHandlers(registry(t, "extract", "fetch", "load")))
	e.dispatch(t, cfg, te)
	e.dispatch(t, cfg, tf)
	e.dispatch(t, cfg, tl)
	poll.Require(t, worktest.Wait, "@extract's failed tick recorded", func() bool {
		outs, err := chain.Read(ctx, e.RDB, "baton", []string{"@extract"}, at)
		return err == nil && outs["@extract"].Status == jobs.StatusFailed
	})
	e.State(t, runtimeQueue, tl, asynq.TaskStateRetry) // waiting for @fetch
	// the operator moves extract to another schedule; the replica reads it
	putSchedule(t, st, "extract", `{schedule: "0 0 1 1 *", concurrency: allow, max_retry: 0, handler: {name: extract}}`)
	if err := f.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	close(gate)
	e.State(t, runtimeQueue, tl, asynq.TaskStateCompleted)
	if r := recordOf(t, e, tl); r == nil || r.Status != jobs.StatusSkipped || !strings.Contains(r.Reason, "@extract@") {
		t.Errorf("@load's tick, whose parent @extract failed its tick, recorded %+v; ran %d times", r, countRuns(exec, "@load"))
	}
}
