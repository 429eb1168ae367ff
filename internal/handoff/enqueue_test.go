package handoff

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
)

// oneJobTasks gives a config of one job, "a", in the default queue, and
// the task of its tick n.
func oneJobTasks(t *testing.T, e *env) func(n int) taskMessage {
	t.Helper()
	cfg := e.Config(t, `  - name: a
    schedule: "@every 1m"
    handler: {name: a}
`)
	job, _ := cfg.Job("a")
	return func(n int) taskMessage {
		m, err := runTaskMessage(cfg, job, worktest.TickOf("a", n), time.Now(), taskExtras{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

func evalshaCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, l := range strings.Split(info, "\n") {
		for _, name := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(l), name+"calls="); ok {
				var c int64
				_, _ = fmt.Sscanf(rest, "%d", &c)
				n += c
			}
		}
	}
	return n
}

// The hand-off's own enqueue writes a task exactly as asynq's client writes
// it: the same message bytes and the same hash fields, in the same queue.
func TestEnqueueWritesWhatAsynqsClientWrites(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    timeout: 90m
    max_retry: 2
    queue: critical
    handler: {name: report}
`, "{queues: {critical: 2, default: 1}}")
	ctx := context.Background()
	job, _ := cfg.Job("report")
	tick := worktest.TickOf("report", 1)
	at := time.Now()
	task, err := newRunTask(cfg, job, tick, at, taskExtras{trace: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.EnqueueContext(ctx, task); err != nil {
		t.Fatal(err)
	}
	key := AsynqTaskKey("baton:critical", tick.ID())
	theirs, err := e.RDB.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Insp.DeleteTask("baton:critical", tick.ID()); err != nil {
		t.Fatal(err)
	}
	m, err := runTaskMessage(cfg, job, tick, at, taskExtras{trace: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := newEnqueuer(e.RDB).enqueue(ctx, m); err != nil {
		t.Fatal(err)
	}
	ours, err := e.RDB.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ours["msg"] != theirs["msg"] {
		t.Errorf("message %q, asynq's client writes %q", ours["msg"], theirs["msg"])
	}
	if ours["state"] != "pending" || ours["pending_since"] == "" || len(ours) != len(theirs) {
		t.Errorf("task hash %v, asynq's client writes %v", ours, theirs)
	}
	if q, err := e.RDB.SMembers(ctx, AsynqQueuesKey).Result(); err != nil || len(q) != 1 || q[0] != "baton:critical" {
		t.Errorf("asynq's queues %v, %v; want [baton:critical]", q, err)
	}
	info, err := e.Insp.GetTaskInfo("baton:critical", tick.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != TaskType || info.State != asynq.TaskStatePending || info.Timeout != 90*time.Minute ||
		info.MaxRetry != 3 || info.Retention != cfg.Retention(job) || string(info.Payload) != string(task.Payload()) {
		t.Errorf("task info %+v", info)
	}
}

// asynq's server runs, retries and archives the tasks the hand-off's own
// enqueue writes, and keeps a completed one for its retention.
func TestEnqueuedTasksRunRetryAndArchiveUnderAsynq(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: ok
    schedule: "@every 1m"
    handler: {name: ok}
  - name: flaky
    schedule: "@every 1m"
    max_retry: 3
    handler: {name: flaky}
  - name: doomed
    schedule: "@every 1m"
    handler: {name: doomed}
`)
	ctx := context.Background()
	enq := newEnqueuer(e.RDB)
	for _, name := range []string{"ok", "flaky", "doomed"} {
		job, _ := cfg.Job(name)
		m, err := runTaskMessage(cfg, job, worktest.TickOf(name, 1), time.Now(), taskExtras{})
		if err != nil {
			t.Fatal(err)
		}
		if err := enq.enqueue(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	attempts := map[string]int{}
	srv := asynq.NewServer(e.Opt, asynq.Config{
		Concurrency:       2,
		Queues:            map[string]int{"baton:default": 1},
		RetryDelayFunc:    func(int, error, *asynq.Task) time.Duration { return 0 },
		LogLevel:          asynq.FatalLevel,
		TaskCheckInterval: 20 * time.Millisecond,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(TaskType, func(_ context.Context, task *asynq.Task) error {
		p, err := ParsePayload(task.Payload())
		if err != nil {
			return err
		}
		mu.Lock()
		attempts[p.Job]++
		n := attempts[p.Job]
		mu.Unlock()
		switch {
		case p.Job == "flaky" && n == 1:
			return errors.New("first attempt fails")
		case p.Job == "doomed":
			return fmt.Errorf("never: %w", asynq.SkipRetry)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	done := e.WaitState(t, "baton:default", worktest.TickOf("ok", 1).ID(), asynq.TaskStateCompleted)
	if done.Retention <= 0 {
		t.Errorf("completed task %+v kept without its retention", done)
	}
	flaky := e.WaitState(t, "baton:default", worktest.TickOf("flaky", 1).ID(), asynq.TaskStateCompleted)
	if flaky.Retried != 1 {
		t.Errorf("flaky task retried %d times, want 1", flaky.Retried)
	}
	e.WaitState(t, "baton:default", worktest.TickOf("doomed", 1).ID(), asynq.TaskStateArchived)
}

// A task whose ID the queue holds already, also one enqueued twice in the
// same batch, answers asynq's task ID conflict, and is written once.
func TestEnqueueOfATaskIDTheQueueHoldsIsAConflict(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: once
    schedule: "@every 1m"
    handler: {name: once}
`)
	ctx := context.Background()
	job, _ := cfg.Job("once")
	m, err := runTaskMessage(cfg, job, worktest.TickOf("once", 1), time.Now(), taskExtras{})
	if err != nil {
		t.Fatal(err)
	}
	enq := newEnqueuer(e.RDB)
	if err := enq.enqueue(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := enq.enqueue(ctx, m); !errors.Is(err, asynq.ErrTaskIDConflict) {
		t.Fatalf("second enqueue = %v, want asynq.ErrTaskIDConflict", err)
	}
	m2, _ := runTaskMessage(cfg, job, worktest.TickOf("once", 2), time.Now(), taskExtras{})
	errs := enqueueQueued(t, enq, []taskMessage{m2, m2})
	if errs[0] != nil || !errors.Is(errs[1], asynq.ErrTaskIDConflict) {
		t.Fatalf("a task twice in one batch = %v; want nil, then a conflict", errs)
	}
	if n, err := e.RDB.LLen(ctx, asynqPendingKey("baton:default")).Result(); err != nil || n != 2 {
		t.Fatalf("pending list holds %d, %v; want the 2 tasks once each", n, err)
	}
}

// enqueueQueued enqueues tasks from one goroutine each while the enqueuer
// is busy, so that all of them wait, then lets them go as one batch; it
// returns their answers in the order of tasks.
func enqueueQueued(t *testing.T, enq *enqueuer, tasks []taskMessage) []error {
	t.Helper()
	enq.mu.Lock()
	enq.busy = true // as if an enqueue were under way
	enq.mu.Unlock()
	errs := make([]error, len(tasks))
	var wg sync.WaitGroup
	for i, m := range tasks {
		wg.Go(func() { errs[i] = enq.enqueue(context.Background(), m) })
		poll.Require(t, 10*time.Second, "the enqueue to wait", func() bool {
			enq.mu.Lock()
			defer enq.mu.Unlock()
			return len(enq.waiting) == i+1
		})
	}
	enq.next() // the enqueue under way returns: the oldest waiter sends all
	wg.Wait()
	return errs
}

// Tasks enqueued at the same time go as one script call per queue.
func TestConcurrentEnqueuesShareAScriptCall(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: a
    schedule: "@every 1m"
    handler: {name: a}
  - name: b
    schedule: "@every 1m"
    queue: other
    handler: {name: b}
`, "{queues: {other: 1, default: 1}}")
	ctx := context.Background()
	var tasks []taskMessage
	for i := range 40 {
		name := []string{"a", "b"}[i%2]
		job, _ := cfg.Job(name)
		m, err := runTaskMessage(cfg, job, worktest.TickOf(name, i+1), time.Now(), taskExtras{})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, m)
	}
	enq := newEnqueuer(e.RDB)
	if err := enqueueScript.Load(ctx, e.RDB).Err(); err != nil {
		t.Fatal(err)
	}
	before := evalshaCalls(t, e.RDB)
	for i, err := range enqueueQueued(t, enq, tasks) {
		if err != nil {
			t.Fatalf("task %d: %v", i, err)
		}
	}
	if n := evalshaCalls(t, e.RDB) - before; n != 2 {
		t.Errorf("40 tasks of 2 queues took %d script calls; want 2", n)
	}
	for _, q := range []string{"baton:default", "baton:other"} {
		if info, err := e.Insp.GetQueueInfo(q); err != nil || info.Pending != 20 {
			t.Errorf("queue %s: %+v, %v; want 20 pending", q, info, err)
		}
	}
}

// A caller's enqueue is bounded by its own context, never by another's: a
// batch led by a caller whose deadline passed after it was taken into the
// batch still enqueues the tasks of the callers with time to spare.
func TestEnqueueIsNotFailedByTheLeadersDeadline(t *testing.T) {
	e := newEnv(t)
	tasks := oneJobTasks(t, e)
	late, onTime := tasks(1), tasks(2)
	enq := newEnqueuer(e.RDB)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	leader := &enqueueCall{ctx: expired, task: late, done: make(chan bool, 1)}
	other := &enqueueCall{ctx: context.Background(), task: onTime, done: make(chan bool, 1)}
	enq.send([]*enqueueCall{leader, other})
	t.Logf("the late caller's enqueue: %v", leader.err)
	if other.err != nil {
		t.Fatalf("an enqueue with no deadline failed with the leader's: %v", other.err)
	}
	if n, err := e.RDB.Exists(context.Background(), AsynqTaskKey("baton:default", onTime.id)).Result(); err != nil || n != 1 {
		t.Fatalf("the on-time task is not in its queue (%d, %v)", n, err)
	}
}

// Cancelling a caller's context ends its wait behind an enqueue under way
// (as enqueue documents): a dispatch that gave up is not held until a slow
// batch returns.
func TestEnqueueWaitEndsWithItsContext(t *testing.T) {
	e := newEnv(t)
	tasks := oneJobTasks(t, e)
	m := tasks(1)
	enq := newEnqueuer(e.RDB)
	enq.mu.Lock()
	enq.busy = true // as if an enqueue were under way, and slow
	enq.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- enq.enqueue(ctx, m) }()
	poll.Require(t, 10*time.Second, "the enqueue to wait", func() bool {
		enq.mu.Lock()
		defer enq.mu.Unlock()
		return len(enq.waiting) == 1
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled enqueue = %v; want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		enq.next() // let it go
		<-done
		t.Fatal("a cancelled enqueue still waited for the batch under way 2s later")
	}
}

// A queue Redis restarted empty forgets asynq's set of queues; the next
// enqueue into a queue puts the queue back in it, as the first one did
// (asynq's inspector, the dashboard and the cross-queue binding check read
// that set).
func TestEnqueueAfterRedisRestartRepublishesTheQueue(t *testing.T) {
	e := newEnv(t)
	tasks := oneJobTasks(t, e)
	ctx := context.Background()
	enq := newEnqueuer(e.RDB)
	m1 := tasks(1)
	if err := enq.enqueue(ctx, m1); err != nil {
		t.Fatal(err)
	}
	if err := e.Srv.Restart(); err != nil {
		t.Fatal(err)
	}
	m2 := tasks(2)
	poll.Require(t, 10*time.Second, "an enqueue after the restart", func() bool {
		return enq.enqueue(ctx, m2) == nil
	})
	if ok, err := e.RDB.SIsMember(ctx, AsynqQueuesKey, "baton:default").Result(); err != nil || !ok {
		t.Fatalf("after a restart, asynq's queues %v lack the queue just enqueued into (%v)", e.RDB.SMembers(ctx, AsynqQueuesKey).Val(), err)
	}
	if qs, err := e.Insp.Queues(); err != nil || len(qs) != 1 {
		t.Fatalf("asynq's inspector lists queues %v, %v; want [baton:default]", qs, err)
	}
}

// A queue whose pending list is not a list gets no task at all: a task
// written but never pending would turn the tick's retries into "already
// dispatched" and never run.
func TestEnqueueIntoABrokenPendingListWritesNothing(t *testing.T) {
	e := newEnv(t)
	tasks := oneJobTasks(t, e)
	ctx := context.Background()
	if err := e.RDB.Set(ctx, asynqPendingKey("baton:default"), "not a list", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m := tasks(1)
	err := newEnqueuer(e.RDB).enqueue(ctx, m)
	if err == nil || errors.Is(err, asynq.ErrTaskIDConflict) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("enqueue = %v; want a WRONGTYPE error naming the pending list", err)
	}
	if n, _ := e.RDB.Exists(ctx, AsynqTaskKey("baton:default", m.id)).Result(); n != 0 {
		t.Fatal("the task was written though it cannot be pending")
	}
}
