package handoff

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/scheduler"
)

type failingRunner struct{ n atomic.Int32 }

func (f *failingRunner) RunLocal(context.Context, *config.Job, scheduler.Tick) error {
	f.n.Add(1)
	return errors.New("worker: shutting down")
}

// Schedule (rolling deploy cron -> local, the local replica stopping):
//  1. asynq knows queues "default" and "other"; the new list has job "report" in local mode,
//     the old list in cron mode;
//  2. a new-list replica owns tick T: bind_queue binds T to "" (local run),
//     then RunLocal fails (its worker is shutting down): Dispatch errors, the
//     scheduler releases the lease "for another try";
//  3. an old-list replica claims T: bind_queue answers "" (bound to a local run)
//     -> ErrAlreadyDispatched, which the scheduler commits as done.
//
// T never runs although a replica was alive and Redis reachable: the binding
// is taken as proof of a dispatch that never happened.
func TestLocalRunThatFailedLeavesNoBinding(t *testing.T) {
	e := newEnv(t)
	cronCfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    handler: {name: report}
  - name: other
    schedule: "@every 1m"
    queue: other
    handler: {name: other}
`, "{queues: {default: 1, other: 1}}")
	localCfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    mode: local
    handler: {name: report}
`)
	// asynq knows two queues
	e.dispatch(t, cronCfg, worktest.TickOf("report", 50))
	e.dispatch(t, cronCfg, worktest.TickOf("other", 50))
	tick := worktest.TickOf("report", 1)
	fr := &failingRunner{}
	err := New(localCfg, e.Client, fr, WithQueueRedis(e.RDB)).Dispatch(context.Background(), tick)
	if err == nil || errors.Is(err, scheduler.ErrAlreadyDispatched) || fr.n.Load() != 1 {
		t.Fatalf("local Dispatch = %v (runs tried %d), want a plain error", err, fr.n.Load())
	}
	// the scheduler leaves the tick for another try: an old-list replica
	err = New(cronCfg, e.Client, nil, WithQueueRedis(e.RDB)).Dispatch(context.Background(), tick)
	_, infoErr := e.Insp.GetTaskInfo("baton:default", tick.ID())
	if errors.Is(err, scheduler.ErrAlreadyDispatched) && infoErr != nil {
		t.Errorf("tick %s: the local run failed to start, and the cron replica's Dispatch = %v (committed done) without enqueueing: the tick is lost", tick.ID(), err)
	}
}

// Schedule (rolling deploy local <- cron, enqueue fails after binding):
//  1. asynq knows queues "old" and "other"; the old list has "report" in cron
//     mode on queue "old", the new list in local mode;
//  2. an old-list replica owns T, binds T to "old", and its enqueue fails
//     (the link to the queue Redis drops between the two calls, or the
//     dispatch deadline hits): Dispatch errors, the lease is released;
//  3. a new-list replica claims T: the binding says "old" ->
//     ErrAlreadyDispatched, committed done; T is in no queue and never runs.
func TestCronBindingWithFailedEnqueueIsNotLost(t *testing.T) {
	e := newEnv(t)
	oldCfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    queue: old
    handler: {name: report}
`, "{queues: {old: 1, other: 1}}")
	otherCfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    queue: other
    handler: {name: report}
`, "{queues: {old: 1, other: 1}}")
	localCfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    mode: local
    handler: {name: report}
`)
	e.dispatch(t, oldCfg, worktest.TickOf("report", 50))
	e.dispatch(t, otherCfg, worktest.TickOf("report", 51))
	// an asynq client whose enqueue fails: nothing listens there
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	broken := asynq.NewClient(asynq.RedisClientOpt{Addr: dead, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { broken.Close() })
	tick := worktest.TickOf("report", 1)
	old := New(oldCfg, broken, nil, WithQueueRedis(e.RDB))
	deadRDB := redis.NewClient(&redis.Options{Addr: dead, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { deadRDB.Close() })
	old.enq = newEnqueuer(deadRDB) // the binding lands, the enqueue fails
	err = old.Dispatch(context.Background(), tick)
	if err == nil || errors.Is(err, scheduler.ErrAlreadyDispatched) {
		t.Fatalf("old Dispatch = %v, want an enqueue error", err)
	}
	runner := &countingRunner{}
	err = New(localCfg, e.Client, runner, WithQueueRedis(e.RDB)).Dispatch(context.Background(), tick)
	_, infoErr := e.Insp.GetTaskInfo("baton:old", tick.ID())
	if errors.Is(err, scheduler.ErrAlreadyDispatched) && runner.n.Load() == 0 && infoErr != nil {
		t.Errorf("tick %s: the old owner's enqueue failed after binding, and the local replica's Dispatch = %v (committed done) without running it: the tick is lost", tick.ID(), err)
	}
}

// Schedule (single-queue deployment, a rolling deploy moves "report" from
// cron to local mode, a slow enqueue):
//  1. asynq knows one queue, "default";
//  2. an old-list (cron) replica owns T: its queue is the only one, so it
//     binds nothing; its enqueue is slow (congested link), still in flight
//     when its tick lease expires;
//  3. a new-list (local) replica claims T (commit first), binds T to a
//     local run (the task has not landed in "default" yet) and runs it;
//  4. the old enqueue lands in "default": a worker runs T a second time.
func TestMovingJobBoundInOneQueueDeployment(t *testing.T) {
	e := newEnv(t)
	cronCfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    handler: {name: report}
`)
	localCfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    mode: local
    handler: {name: report}
`)
	e.dispatch(t, cronCfg, worktest.TickOf("report", 50)) // asynq knows "default"
	slow := e.slowClient(t, 1500*time.Millisecond)
	tick := worktest.TickOf("report", 1)
	// both replicas see in the roster that the other routes the job
	// differently (the worker's RoutedDifferently, as baton run wires it)
	moving := func(string) bool { return true }
	oldErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		oldErr <- New(cronCfg, slow, nil, WithQueueRedis(e.RDB), WithMovingJobs(moving)).Dispatch(ctx, tick)
	}()
	time.Sleep(700 * time.Millisecond) // real time: the old owner's lease expires by the masters' clocks; a local replica takes T
	runner := &countingRunner{}
	localErr := New(localCfg, e.Client, runner, WithQueueRedis(e.RDB), WithMovingJobs(moving)).Dispatch(context.Background(), tick)
	oe := <-oldErr
	_, infoErr := e.Insp.GetTaskInfo("baton:default", tick.ID())
	t.Logf("old Dispatch: %v; local Dispatch: %v; local runs %d; task in default: %v", oe, localErr, runner.n.Load(), infoErr == nil)
	if runner.n.Load() > 0 && infoErr == nil {
		t.Errorf("tick %s run locally and enqueued into \"default\": it runs twice", tick.ID())
	}
}

// TestAsynqKeyLayout guards the two asynq names the dispatcher reads to find
// a tick's task in another queue.
func TestAsynqKeyLayout(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    queue: critical
    handler: {name: report}
`, "{queues: {critical: 1}}")
	tick := worktest.TickOf("report", 1)
	e.dispatch(t, cfg, tick)
	ctx := context.Background()
	if n := e.RDB.Exists(ctx, AsynqTaskKey("baton:critical", tick.ID())).Val(); n != 1 {
		t.Errorf("asynq's task key %q not found: asynq's layout changed", AsynqTaskKey("baton:critical", tick.ID()))
	}
	if !e.RDB.SIsMember(ctx, AsynqQueuesKey, "baton:critical").Val() {
		t.Errorf("asynq's queue set %q does not list the queue: asynq's layout changed", AsynqQueuesKey)
	}
}

// A job moved to another queue (or to local mode) by a new job list: a tick
// the old list enqueued into its queue is neither enqueued into the new
// queue nor run locally by a replica with the new list (asynq's task IDs are
// unique within one queue only).
func TestTickEnqueuedOnceAcrossQueues(t *testing.T) {
	e := newEnv(t)
	jobOn := func(queue, mode string) *config.Config {
		return e.Config(t, `  - name: report
    schedule: "@every 1m"
    queue: `+queue+`
    mode: `+mode+`
    handler: {name: report}
`, "{queues: {old: 1, new: 1}}")
	}
	oldCfg, newCfg := jobOn("old", "cron"), jobOn("new", "cron")
	localCfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    mode: local
    handler: {name: report}
`)
	tick := worktest.TickOf("report", 1)
	if err := New(oldCfg, e.Client, nil, WithQueueRedis(e.RDB)).Dispatch(context.Background(), tick); err != nil {
		t.Fatal(err)
	}
	// without the queue Redis the dispatcher cannot look: the old behaviour
	// enqueues the tick a second time, into the other queue
	other := worktest.TickOf("report", 2)
	if err := New(oldCfg, e.Client, nil).Dispatch(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	newD := New(newCfg, e.Client, nil, WithQueueRedis(e.RDB))
	err := newD.Dispatch(context.Background(), tick)
	if !errors.Is(err, scheduler.ErrAlreadyDispatched) || !strings.Contains(err.Error(), `"old"`) {
		t.Fatalf("new list's Dispatch = %v, want ErrAlreadyDispatched naming queue old", err)
	}
	if _, err := e.Insp.GetTaskInfo("baton:new", tick.ID()); err == nil {
		t.Errorf("the tick was enqueued into the new queue too")
	}
	runner := &countingRunner{}
	localD := New(localCfg, e.Client, runner, WithQueueRedis(e.RDB))
	if err := localD.Dispatch(context.Background(), tick); !errors.Is(err, scheduler.ErrAlreadyDispatched) {
		t.Fatalf("local Dispatch = %v, want ErrAlreadyDispatched", err)
	}
	if runner.n.Load() != 0 {
		t.Errorf("the enqueued tick was also run locally")
	}
	// a tick nobody enqueued runs where the new list says
	fresh := worktest.TickOf("report", 3)
	if err := newD.Dispatch(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Insp.GetTaskInfo("baton:new", fresh.ID()); err != nil {
		t.Errorf("tick not in the new queue: %v", err)
	}
	if err := localD.Dispatch(context.Background(), worktest.TickOf("report", 4)); err != nil || runner.n.Load() != 1 {
		t.Errorf("local Dispatch of a fresh tick = %v, runs %d", err, runner.n.Load())
	}
}

// countingRunner counts the local runs handed to it.
type countingRunner struct{ n atomic.Int32 }

func (c *countingRunner) RunLocal(context.Context, *config.Job, scheduler.Tick) error {
	c.n.Add(1)
	return nil
}
