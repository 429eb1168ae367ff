package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
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
	te, tl := worktest.TickOf("extract", 1), worktest.TickOf("load", 1)
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
	te := worktest.TickOf("extract", 1)
	tl, tn := worktest.TickOf("load", 1), worktest.TickOf("notify", 1)
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
	e.dispatch(t, cfg, worktest.TickOf("join", 1))
	e.dispatch(t, cfg, worktest.TickOf("a", 1))
	worktest.Recv(t, exec.started, "a's run")
	e.State(t, "baton:default", worktest.TickOf("a", 1), asynq.TaskStateCompleted)
	none(t, exec.started, 500*time.Millisecond, "join's run with b's tick not ended")
	e.dispatch(t, cfg, worktest.TickOf("b", 1))
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
	tl := worktest.TickOf("load", 1)
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
