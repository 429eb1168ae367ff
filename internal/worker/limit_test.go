package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
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
