package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// limitConfig loads the test env's config with limits at the top.
func limitConfig(t *testing.T, e *env, limits, jobsYAML string) *config.Config {
	t.Helper()
	y := "limits: " + limits + "\n" + e.YAML(jobsYAML)
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return cfg
}

// gates hands each run a gate of its own, by job, and counts the runs in
// flight at once.
type gates struct {
	mu      sync.Mutex
	open    map[string]chan struct{}
	running atomic.Int32
	most    atomic.Int32
}

func newGates(jobNames ...string) *gates {
	g := &gates{open: map[string]chan struct{}{}}
	for _, j := range jobNames {
		g.open[j] = make(chan struct{})
	}
	return g
}

func (g *gates) run(ctx context.Context, run jobs.Run, _ executor.Validity) error {
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	g.mu.Lock()
	gate := g.open[run.Job]
	g.mu.Unlock()
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (g *gates) let(job string) { close(g.open[job]) }

// At most N runs of all the jobs naming a limit run at once, across
// workers: the third of three jobs sharing two slots waits until one ends,
// then takes the slot it freed; each run knows its slot and its fence, and
// the slots' holder records name the runs.
func TestALimitBoundsTheRunsOfEveryJobNamingItAcrossWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 2}", `  - name: a
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    handler: {name: a}
  - name: b
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    handler: {name: b}
  - name: c
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    concurrency: allow
    handler: {name: c}
`)
	g := newGates("a", "b", "c")
	exec1, exec2 := newFakeExec(g.run), newFakeExec(g.run)
	exec2.started = exec1.started
	e.worker(t, cfg, exec1, WithReplica("w1"))
	locks2, err := locking.New(e.RDB, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks2.Close() }) // after the worker's shutdown
	e.workerWith(t, e.Opt, locks2, cfg, exec2, WithReplica("w2"))
	runs := exec1.started // both workers' runs
	for _, j := range []string{"a", "b", "c"} {
		e.dispatch(t, cfg, worktest.TickOf(j, 1))
	}
	first := worktest.Recv(t, runs, "a first run")
	second := worktest.Recv(t, runs, "a second run")
	none(t, runs, 300*time.Millisecond, "a third run while both slots are held")
	slots := map[int]string{}
	for _, s := range []started{first, second} {
		r := s.run
		if r.Slot.Limit != "warehouse" || r.Slot.Fence <= 0 || (r.Slot.Index != 0 && r.Slot.Index != 1) {
			t.Errorf("run of %s holds slot %+v", r.Job, r.Slot)
		}
		slots[r.Slot.Index] = r.Job
	}
	if len(slots) != 2 {
		t.Fatalf("two runs in one slot: %v", slots)
	}
	var holders []*SlotHolder
	poll.Require(t, worktest.Wait, "both slots' holder records", func() bool {
		holders, err = ReadSlotHolders(context.Background(), e.RDB, "baton", "warehouse", 2)
		return err == nil && holders[0] != nil && holders[1] != nil
	})
	for i, h := range holders {
		if h.Job != slots[i] || h.Fence <= 0 || h.Replica == "" || h.RunID == "" {
			t.Errorf("slot %d's holder record %+v; the run holding it is %s's", i, h, slots[i])
		}
	}
	// the first run ends: the waiting one takes its slot
	g.let(first.run.Job)
	third := worktest.Recv(t, runs, "the third run, once a slot is free")
	if third.run.Slot.Index != first.run.Slot.Index || third.run.Slot.Fence <= first.run.Slot.Fence {
		t.Errorf("the third run holds %+v; the freed slot was %+v", third.run.Slot, first.run.Slot)
	}
	for _, j := range []string{"a", "b", "c"} {
		if j != first.run.Job {
			g.let(j)
		}
	}
	for _, j := range []string{"a", "b", "c"} {
		e.State(t, "baton:default", worktest.TickOf(j, 1), asynq.TaskStateCompleted)
	}
	if m := g.most.Load(); m != 2 {
		t.Errorf("%d runs at once, want at most (and here exactly) 2", m)
	}
	poll.Require(t, worktest.Wait, "the slots' holder records deleted with their release", func() bool {
		holders, err = ReadSlotHolders(context.Background(), e.RDB, "baton", "warehouse", 2)
		return err == nil && holders[0] == nil && holders[1] == nil
	})
}

// A run that gets no slot by its tick's starting deadline is skipped, the
// history saying which limit and who held its slots; the job's execution
// lease is given back (its next tick runs).
func TestARunWithoutASlotByItsStartingDeadlineIsSkippedSayingWhoHeldTheSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: a
    schedule: "@every 1m"
    limit: warehouse
    handler: {name: a}
  - name: b
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    handler: {name: b}
`)
	g := newGates("a", "b")
	exec := newFakeExec(g.run)
	ta, tb := worktest.TickOf("a", 1), worktest.TickOf("b", 2)
	clk := clock.NewFake(tb.At)
	e.worker(t, cfg, exec, WithReplica("w1"), WithClock(clk))
	e.dispatch(t, cfg, ta)
	worktest.Recv(t, exec.started, "a's run")
	e.dispatch(t, cfg, tb)
	// b holds its job's lease while it waits: its holder record says so
	poll.Require(t, worktest.Wait, "b waiting for a slot", func() bool {
		return e.RDB.Exists(context.Background(), holderKey("baton", "b")).Val() == 1
	})
	none(t, exec.started, 200*time.Millisecond, "b's run while a holds the only slot")
	clk.Advance(10 * time.Minute)
	e.State(t, "baton:default", tb, asynq.TaskStateCompleted) // skipped: a success, not retried
	var rec jobs.RunRecord
	poll.Require(t, worktest.Wait, "b's tick recorded skipped", func() bool {
		recs, _ := history.Read(context.Background(), e.RDB, "baton", "b", 0)
		for _, r := range recs {
			if r.Tick.Equal(tb.At) && r.Status == jobs.StatusSkipped {
				rec = r
				return true
			}
		}
		return false
	})
	want := fmt.Sprintf(`limit "warehouse": its 1 slot stayed held until the tick's starting deadline (10m0s): held by a@%s on w1 (slot 0)`, ta.At.Format(time.RFC3339))
	if rec.Reason != want {
		t.Errorf("b's skip says\n%q\nwant\n%q", rec.Reason, want)
	}
	// b's lease was given back: its next tick runs once a is done
	g.let("a")
	g.let("b")
	e.dispatch(t, cfg, worktest.TickOf("b", 3))
	if s := worktest.Recv(t, exec.started, "b's next tick"); !s.run.Tick.Equal(worktest.TickOf("b", 3).At) {
		t.Errorf("ran %+v", s.run)
	}
}

// A run whose slot is lost (its key gone, as if expired while the holder
// was frozen) is stopped as one whose execution lease is lost, the error
// naming the slot, and retried.
func TestARunWhoseSlotIsLostIsStoppedAndRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: lossy
    schedule: "@every 1m"
    limit: warehouse
    max_retry: 1
    retry_backoff: 10ms
    lock_ttl: 1s
    handler: {name: lossy}
`)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Attempt > 1 {
			return nil
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	e.worker(t, cfg, exec)
	tick := worktest.TickOf("lossy", 1)
	e.dispatch(t, cfg, tick)
	s := worktest.Recv(t, exec.started, "first attempt")
	if v, ok := s.v.(*leases); !ok || len(v.held) != 2 {
		t.Errorf("validity %T: want the execution lease and the slot", s.v)
	}
	if err := e.RDB.Del(context.Background(), "baton:lock:{sem:limit:warehouse#0}").Err(); err != nil {
		t.Fatal(err)
	}
	end := worktest.Recv(t, exec.ended, "first attempt's end")
	var sl *slotLost
	if !errors.Is(end.cause, locking.ErrLost) || !errors.As(end.cause, &sl) {
		t.Errorf("first attempt ended with cause %v", end.cause)
	}
	if s := worktest.Recv(t, exec.started, "retry"); s.run.Attempt != 2 || s.run.Slot.Limit != "warehouse" {
		t.Errorf("retry %+v", s.run)
	}
	info := e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	if info.Retried != 1 || !strings.Contains(info.LastErr, `slot 0 of limit "warehouse" lost mid-run`) {
		t.Errorf("retried %d, last error %q", info.Retried, info.LastErr)
	}
}

// A job naming a limit runs under its concurrency's policy within the
// limit's; one naming none under its concurrency's alone.
func TestAJobNamingALimitRunsItsConcurrencysPolicyWithinTheLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: limited
    schedule: "@every 1m"
    concurrency: replace
    limit: warehouse
    handler: {name: a}
  - name: free
    schedule: "@every 1m"
    handler: {name: b}
`)
	en := &engine{cfg: cfg, locks: e.Locks}
	en.choosePolicies()
	limited, _ := cfg.Job("limited")
	free, _ := cfg.Job("free")
	p, ok := en.policyOf(limited).(limitedPolicy)
	if !ok || fmt.Sprintf("%T", p.policy) != "worker.replacePolicy" || p.limit != "warehouse" || p.size != 1 {
		t.Errorf("limited: policy %T %+v", en.policyOf(limited), p)
	}
	if got := fmt.Sprintf("%T", en.policyOf(free)); got != "worker.forbidPolicy" {
		t.Errorf("free: policy %s", got)
	}
}

// recordOf is tick's history record, nil while it has none.
func recordOf(t *testing.T, e *env, tick scheduler.Tick) *jobs.RunRecord {
	t.Helper()
	recs, err := history.Read(context.Background(), e.RDB, "baton", tick.Job, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Tick.Equal(tick.At) {
			return &r
		}
	}
	return nil
}

// A run that waits for a slot waits up to its tick's starting deadline,
// however short the job's timeout: the wait is not part of the run, and a
// run that got its slot still has its whole timeout. (The asynq task's
// timeout is the job's: a wait longer than it ended the attempt as failed.)
func TestAWaitForASlotDoesNotSpendTheRunsTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: a
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    handler: {name: a}
  - name: b
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    timeout: 2s
    max_retry: 0
    handler: {name: b}
`)
	g := newGates("a", "b")
	exec := newFakeExec(g.run)
	e.worker(t, cfg, exec)
	ta, tb := worktest.TickOf("a", 1), worktest.TickOf("b", 2)
	e.dispatch(t, cfg, ta)
	worktest.Recv(t, exec.started, "a's run")
	e.dispatch(t, cfg, tb)
	poll.Require(t, worktest.Wait, "b waiting for a slot", func() bool {
		return e.RDB.Exists(context.Background(), holderKey("baton", "b")).Val() == 1
	})
	time.Sleep(3 * time.Second) // longer than b's timeout, well within its starting deadline
	if r := recordOf(t, e, tb); r != nil {
		t.Errorf("b's tick ended while it waited for a slot: %s: %s", r.Status, r.Reason)
	}
	g.let("a")
	s := worktest.Recv(t, exec.started, "b's run, once a freed the slot")
	if s.run.Job != "b" {
		t.Fatalf("ran %+v", s.run)
	}
	g.let("b")
	e.State(t, "baton:default", tb, asynq.TaskStateCompleted)
}

// A run whose slot was lost, and taken by another run, does not delete the
// new holder's record as it gives its slot back: the record names the run
// holding the slot.
func TestARunThatLostItsSlotLeavesTheNewHoldersRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: a
    schedule: "@every 1m"
    limit: warehouse
    lock_ttl: 1s
    max_retry: 0
    handler: {name: a}
  - name: b
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    handler: {name: b}
`)
	aEnds, bEnds := make(chan struct{}), make(chan struct{})
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Job == "a" {
			<-ctx.Done() // the slot is lost
			<-aEnds      // slow to stop: b takes the slot meanwhile
			return context.Cause(ctx)
		}
		<-bEnds
		return nil
	})
	e.worker(t, cfg, exec)
	ta, tb := worktest.TickOf("a", 1), worktest.TickOf("b", 2)
	e.dispatch(t, cfg, ta)
	worktest.Recv(t, exec.started, "a's run")
	e.dispatch(t, cfg, tb)
	poll.Require(t, worktest.Wait, "b waiting for a slot", func() bool {
		return e.RDB.Exists(context.Background(), holderKey("baton", "b")).Val() == 1
	})
	// a's slot expires (as if its worker froze): b takes it
	if err := e.RDB.Del(context.Background(), "baton:lock:{sem:limit:warehouse#0}").Err(); err != nil {
		t.Fatal(err)
	}
	if s := worktest.Recv(t, exec.started, "b's run"); s.run.Job != "b" {
		t.Fatalf("ran %+v", s.run)
	}
	holderIs := func(job string) bool {
		hs, err := ReadSlotHolders(context.Background(), e.RDB, "baton", "warehouse", 1)
		return err == nil && hs[0] != nil && hs[0].Job == job
	}
	poll.Require(t, worktest.Wait, "b's holder record", func() bool { return holderIs("b") })
	close(aEnds)
	e.State(t, "baton:default", ta, asynq.TaskStateArchived) // lease lost, no retry left
	if !holderIs("b") {
		hs, _ := ReadSlotHolders(context.Background(), e.RDB, "baton", "warehouse", 1)
		t.Errorf("slot 0, held by b's run, has the holder record %+v once a gave its lost slot back (%q)", hs[0], e.RDB.Get(context.Background(), slotHolderKey("baton", "warehouse", 0)).Val())
	}
	close(bEnds)
}

// delayCmd holds the first command match reports back for d, once armed.
type delayCmd struct {
	match func(redis.Cmder) bool
	d     time.Duration
	armed atomic.Bool
}

func (h *delayCmd) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *delayCmd) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.match(cmd) && h.armed.CompareAndSwap(true, false) {
			time.Sleep(h.d)
		}
		return next(ctx, cmd)
	}
}

func (h *delayCmd) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// onKey matches a command whose first key is key.
func onKey(key string) func(redis.Cmder) bool {
	return func(c redis.Cmder) bool { return strings.HasSuffix(cmdLine(c), " "+key) }
}

// A tick of a replace job that replaced the job's run takes the slot that
// run held, also once its starting deadline has passed (it waited for the
// replaced run to stop): the replaced run gives its slot back before the
// job's lease, so the slot is free when the new run gets the job; and the
// new run, which waited for the job on purpose, waits for a slot a
// starting deadline from then.
func TestAReplacingTickTakesTheSlotOfTheRunItReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: r
    schedule: "@every 1m"
    concurrency: replace
    limit: warehouse
    handler: {name: r}
`)
	// the first run's release is slow to reach its slot
	h := &delayCmd{match: onKey(slotHolderKey("baton", "warehouse", 0)), d: time.Second}
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Tick.Equal(worktest.TickOf("r", 1).At) {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	})
	t1, t2 := worktest.TickOf("r", 1), worktest.TickOf("r", 2)
	// the second tick's starting deadline has passed by the worker's clock
	clk := clock.NewFake(t2.At.Add(2 * time.Minute))
	e.workerOn(t, hookedOpt{e.Opt, h}, cfg, exec, WithQueueAsLockMaster(), WithClock(clk))
	e.dispatch(t, cfg, t1)
	worktest.Recv(t, exec.started, "the first tick's run")
	h.armed.Store(true)
	e.dispatch(t, cfg, t2)
	e.State(t, "baton:default", t1, asynq.TaskStateArchived) // replaced
	e.State(t, "baton:default", t2, asynq.TaskStateCompleted)
	if r := recordOf(t, e, t2); r == nil || r.Status != jobs.StatusOK {
		t.Errorf("the replacing tick's record %+v, want it run", r)
	}
}

// A run of a replace job waiting for a slot (it holds the job's lease) is
// replaced by a newer tick: recorded replaced, not retried, and the job's
// lease given back, so that the newer tick takes the job and then the slot.
func TestAReplacedRunWaitingForASlotGivesBackTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: x
    schedule: "@every 1m"
    limit: warehouse
    handler: {name: x}
  - name: r
    schedule: "@every 1m"
    concurrency: replace
    limit: warehouse
    starting_deadline: 10m
    handler: {name: r}
`)
	g := newGates("x", "r")
	exec := newFakeExec(g.run)
	e.worker(t, cfg, exec)
	tx, t1, t2 := worktest.TickOf("x", 1), worktest.TickOf("r", 2), worktest.TickOf("r", 3)
	e.dispatch(t, cfg, tx)
	worktest.Recv(t, exec.started, "x's run")
	e.dispatch(t, cfg, t1)
	poll.Require(t, worktest.Wait, "r's first tick waiting for a slot", func() bool {
		return e.RDB.Exists(context.Background(), holderKey("baton", "r")).Val() == 1
	})
	e.dispatch(t, cfg, t2)
	e.State(t, "baton:default", t1, asynq.TaskStateArchived)
	if r := recordOf(t, e, t1); r == nil || r.Status != jobs.StatusReplaced {
		t.Errorf("the replaced tick's record %+v", r)
	}
	none(t, exec.started, 200*time.Millisecond, "r's newer tick while x holds the slot")
	g.let("x")
	if s := worktest.Recv(t, exec.started, "r's newer tick"); !s.run.Tick.Equal(t2.At) {
		t.Errorf("ran %+v", s.run)
	}
	g.let("r")
	e.State(t, "baton:default", t2, asynq.TaskStateCompleted)
}

// A replace job naming a limit is replaced as one naming none: a newer
// tick stops the job's running run (the worker follows the job's replace
// requests), then runs in the slot it freed.
func TestAReplaceJobNamingALimitStopsItsOlderRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: r
    schedule: "@every 1m"
    concurrency: replace
    limit: warehouse
    starting_deadline: 10m
    handler: {name: r}
`)
	t1, t2 := worktest.TickOf("r", 1), worktest.TickOf("r", 2)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Tick.Equal(t1.At) {
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	})
	e.worker(t, cfg, exec)
	e.dispatch(t, cfg, t1)
	worktest.Recv(t, exec.started, "the older tick's run")
	e.dispatch(t, cfg, t2)
	if end := worktest.Recv(t, exec.ended, "the older run's end"); !errors.Is(end.cause, ErrReplaced) {
		t.Errorf("the older run ended with cause %v", end.cause)
	}
	if s := worktest.Recv(t, exec.started, "the newer tick's run"); !s.run.Tick.Equal(t2.At) {
		t.Errorf("ran %+v", s.run)
	}
	e.State(t, "baton:default", t1, asynq.TaskStateArchived)
	e.State(t, "baton:default", t2, asynq.TaskStateCompleted)
}

// A kept tick of a buffering job naming a limit, which waited for the job
// on purpose past its tick's starting deadline, waits for a slot a starting
// deadline from when it got the job (as a retry does), not at all: a
// run of another job that took the slot in between does not cost the kept
// tick its run.
func TestAKeptTickWaitsForASlotAfterItGotTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: b
    schedule: "@every 1m"
    concurrency: buffer_all
    limit: warehouse
    handler: {name: b}
  - name: y
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    handler: {name: y}
`)
	b1, b2, ty := worktest.TickOf("b", 1), worktest.TickOf("b", 2), worktest.TickOf("y", 3)
	gates := map[time.Time]chan struct{}{b1.At: make(chan struct{}), ty.At: make(chan struct{}), b2.At: make(chan struct{})}
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		select {
		case <-gates[run.Tick]:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	// b's run gives its job up a moment after its slot: y takes the slot
	h := &delayCmd{match: func(c redis.Cmder) bool { return slices.Contains(c.Args(), any("mark_next")) }, d: 500 * time.Millisecond}
	// the kept tick's starting deadline passes while b's first run runs
	clk := clock.NewFake(b2.At.Add(2 * time.Minute))
	e.workerOn(t, hookedOpt{e.Opt, h}, cfg, exec, WithClock(clk))
	e.dispatch(t, cfg, b1)
	worktest.Recv(t, exec.started, "b's first run")
	e.dispatch(t, cfg, b2)
	e.requireKept(t, "b", b2)
	e.dispatch(t, cfg, ty)
	poll.Require(t, worktest.Wait, "y waiting for a slot", func() bool {
		return e.RDB.Exists(context.Background(), holderKey("baton", "y")).Val() == 1
	})
	h.armed.Store(true)
	close(gates[b1.At])
	if s := worktest.Recv(t, exec.started, "y's run in the slot b freed"); s.run.Job != "y" {
		t.Fatalf("ran %+v", s.run)
	}
	// the kept tick takes the job and, the slot being y's, waits: its
	// holder record says so
	poll.Require(t, worktest.Wait, "the kept tick holding b, waiting for a slot", func() bool {
		v, _ := e.RDB.Get(context.Background(), holderKey("baton", "b")).Result()
		return strings.Contains(v, `"id":"`+b2.ID()+`"`)
	})
	close(gates[ty.At])
	close(gates[b2.At])
	e.State(t, "baton:default", b2, asynq.TaskStateCompleted)
	if r := recordOf(t, e, b2); r == nil || r.Status != jobs.StatusOK {
		t.Errorf("the kept tick's record %+v, want it run", r)
	}
}

// A shutdown that stops a run waiting for a slot pushes its task back (not
// a retry), gives back the job's lease, and records the attempt as stopped
// by the shutdown while it waited for a slot of the limit.
func TestAShutdownStopsARunWaitingForASlotAndPutsItsTaskBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := limitConfig(t, e, "{warehouse: 1}", `  - name: a
    schedule: "@every 1m"
    limit: warehouse
    handler: {name: a}
  - name: b
    schedule: "@every 1m"
    limit: warehouse
    starting_deadline: 10m
    handler: {name: b}
`)
	cfg.Worker.ShutdownGrace = 200 * time.Millisecond
	exec := newFakeExec(blockUntil(nil))
	w := e.worker(t, cfg, exec)
	ta, tb := worktest.TickOf("a", 1), worktest.TickOf("b", 2)
	e.dispatch(t, cfg, ta)
	worktest.Recv(t, exec.started, "a's run")
	e.dispatch(t, cfg, tb)
	poll.Require(t, worktest.Wait, "b waiting for a slot", func() bool {
		return e.RDB.Exists(context.Background(), holderKey("baton", "b")).Val() == 1
	})
	shutdownWithin(t, w)
	ctx := context.Background()
	for _, name := range []string{"exec:a", "exec:b"} {
		l, err := e.Locks.TryLock(ctx, name, time.Second)
		if err != nil {
			t.Errorf("%s not released: %v", name, err)
			continue
		}
		_ = l.Release(ctx)
	}
	if n := e.RDB.Exists(ctx, "baton:lock:{sem:limit:warehouse#0}").Val(); n != 0 {
		t.Error("the slot is still held after Shutdown")
	}
	e.State(t, "baton:default", tb, asynq.TaskStatePending) // pushed back, not retried
	r := recordOf(t, e, tb)
	if r == nil || strings.Contains(r.Reason, "execution lease") || !strings.Contains(r.Reason, "slot") {
		t.Errorf("b's record %+v: want it to say it stopped waiting for a slot", r)
	}
}
