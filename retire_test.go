package baton_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// hourlyJobs loads a config of hourly exec jobs in namespace ns, on the
// Redis at addr, whose worker consumes queues default and other.
func hourlyJobs(t *testing.T, addr, ns string, jobs ...string) *config.Config {
	t.Helper()
	y := fmt.Sprintf("redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: %s\n"+
		"worker: {queues: {default: 1, other: 1}, poll_interval: 100ms}\njobs:\n", addr, ns)
	for _, j := range jobs {
		y += fmt.Sprintf("  - name: %s\n    schedule: \"@every 1h\"\n    exec: {command: [\"true\"]}\n", j)
	}
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A replica that stopped claiming is retirable beside a replica of the next
// job list once its claims are over and no queue holds a task of a job
// only it runs (removed, or moved to another queue or Redis); a task of a
// job both lists run does not hold it back.
func TestRetirableAfterStopClaiming(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	list := func(ns string, jobs ...string) *config.Config { return hourlyJobs(t, srv.Addr(), ns, jobs...) }
	cfg := list("retire", "keep", "gone")
	next := list("retire", "keep")
	r := running(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	retirable := func(next *config.Config) string {
		t.Helper()
		why, err := r.Retirable(ctx, next)
		if err != nil {
			t.Fatal(err)
		}
		return why
	}
	poll.Require(t, 10*time.Second, "the replica running", func() bool { return r.Ready(ctx) == "" })
	if why := retirable(next); why != "claims in flight" {
		t.Errorf("before StopClaiming: %q", why)
	}
	r.StopClaiming()
	var why string
	if !poll.Until(10*time.Second, func() bool { why = retirable(next); return why == "" }) {
		t.Fatalf("not retirable 10s after StopClaiming: %s", why)
	}

	// tasks that wait: one of a job both lists run, one of the removed job
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer client.Close()
	queue := cfg.QueueName("default")
	for _, id := range []string{"keep@2030-01-01T00:00:00Z", "gone@2030-01-01T00:00:00Z"} {
		if _, err := client.Enqueue(asynq.NewTask("baton:tick", nil), asynq.TaskID(id), asynq.Queue(queue), asynq.ProcessIn(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if why := retirable(next); !strings.Contains(why, "holds gone@2030-01-01T00:00:00Z, of a job only it runs") {
		t.Errorf("with a task of the removed job waiting: %q", why)
	}
	if why := retirable(cfg); why != "" {
		t.Errorf("beside a replica of the same list: %q", why)
	}
	// another namespace runs none of its tasks
	if why := retirable(list("elsewhere", "keep", "gone")); !strings.Contains(why, "of a job only it runs") {
		t.Errorf("beside a replica of another namespace: %q", why)
	}
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	if err := insp.DeleteTask(queue, "gone@2030-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	if why := retirable(next); why != "" {
		t.Errorf("with only a task of a job both run: %q", why)
	}
}

// Schedule: a task of the removed job cycles as asynq moves a handed-back
// task (new worker: pending -> active -> retry, forwarder: retry ->
// pending). QueuedTaskOf reads pending, active, scheduled, retry in a
// pipeline, not atomically: a forward (retry -> pending, one atomic asynq
// script) that lands between its LRANGE pending and its ZRANGE retry hides
// the task from both reads, and the replica is called retirable while the
// task waits. The moves here are asynq's own scripts' effects (forwardCmd;
// dequeue + retryCmd taken together, which cannot hide the task).
func TestRetireForwardBetweenReadsDoesNotHideTask(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := hourlyJobs(t, srv.Addr(), "rr1", "keep", "gone")
	next := hourlyJobs(t, srv.Addr(), "rr1", "keep")
	queue := cfg.QueueName("default")
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	r := running(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	poll.Require(t, 10*time.Second, "the replica running", func() bool { return r.Ready(ctx) == "" })
	r.StopClaiming()
	poll.Require(t, 10*time.Second, "retirable", func() bool { w, err := r.Retirable(ctx, next); return err == nil && w == "" })

	// the task, kept from the old worker by pausing the queue (the old
	// worker would run it; here only the new worker's hand-back cycle moves it)
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer client.Close()
	if err := insp.PauseQueue(queue); err != nil {
		t.Fatal(err)
	}
	id := "gone@2030-01-01T00:00:00Z"
	if _, err := client.Enqueue(asynq.NewTask("baton:run", nil), asynq.TaskID(id), asynq.Queue(queue)); err != nil {
		t.Fatal(err)
	}
	base := "asynq:{" + queue + "}:"
	forward := redis.NewScript(`
if redis.call("ZREM", KEYS[1], ARGV[1]) == 1 then
  redis.call("LPUSH", KEYS[2], ARGV[1])
  redis.call("HSET", KEYS[3], "state", "pending")
end
return 0`)
	handBack := redis.NewScript(`
if redis.call("LREM", KEYS[2], 0, ARGV[1]) == 1 then
  redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
  redis.call("HSET", KEYS[3], "state", "retry")
end
return 0`)
	mover := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer mover.Close()
	keys := []string{base + "retry", base + "pending", base + "t:" + id}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = handBack.Run(ctx, mover, keys, id, time.Now().Unix()).Err()
			_ = forward.Run(ctx, mover, keys, id).Err()
		}
	})
	var hidden, checks int
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && hidden == 0 {
		w, err := r.Retirable(ctx, next)
		checks++
		if err == nil && w == "" {
			hidden++
		}
	}
	close(stop)
	wg.Wait()
	if hidden > 0 {
		t.Errorf("retirable while queue %s holds %s of the removed job (moving retry -> pending): %d in %d checks", queue, id, hidden, checks)
	}
	t.Logf("%d checks, %d missed the task", checks, hidden)
}

// Schedule: the old worker consumes queue other, which holds a task of job
// gone (its config queue is default: e.g. left in other's retry set by an
// earlier reload that moved gone from other to default and stopped at the
// drain deadline, or bound there by a dispatcher with another list). The
// old worker runs it (process does not compare the queue with the job's),
// and the roster says the old replica runs gone from other, so the new
// worker hands it back. Retirable read only default for gone: the old
// replica retired, and the new worker archived the tick. Fixed: every
// queue the old worker consumes is read.
func TestRetireTaskInAnotherConsumedQueueHoldsItBack(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := hourlyJobs(t, srv.Addr(), "rr2", "keep", "gone")
	next := hourlyJobs(t, srv.Addr(), "rr2", "keep")
	other := cfg.QueueName("other")
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()

	old, err := baton.New(cfg, baton.WithReplicaID("old"))
	if err != nil {
		t.Fatal(err)
	}
	octx, ostop := context.WithCancel(context.Background())
	odone := make(chan error)
	go func() { _ = old.Run(octx); close(odone) }()
	defer func() { ostop(); <-odone }()
	nw := running(t, next, baton.WithReplicaID("new"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	poll.Require(t, 10*time.Second, "both running", func() bool { return old.Ready(ctx) == "" && nw.Ready(ctx) == "" })

	// a tick of gone waiting in other (paused: it waits, as behind a backoff)
	if err := insp.PauseQueue(other); err != nil {
		t.Fatal(err)
	}
	tick := time.Now().UTC().Truncate(time.Second)
	id := "gone@" + tick.Format(time.RFC3339)
	payload, _ := json.Marshal(map[string]any{"job": "gone", "tick": tick.Format(time.RFC3339), "run_id": "reviewrun1",
		"replica": "old", "ns": cfg.Namespace, "q": other})
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer client.Close()
	if _, err := client.Enqueue(asynq.NewTask("baton:run", payload), asynq.TaskID(id), asynq.Queue(other),
		asynq.MaxRetry(3), asynq.Retention(time.Hour)); err != nil {
		t.Fatal(err)
	}

	old.StopClaiming()
	var why string
	retirable := poll.Until(2*time.Second, func() bool {
		w, err := old.Retirable(ctx, next)
		why = fmt.Sprint(w, err)
		return err == nil && w == ""
	})
	if !retirable {
		t.Logf("held back, as it should: %s", why)
		return
	}
	t.Errorf("retirable while queue %s holds %s, a tick of the removed job the old worker would run", other, id)
	// what follows the reload: the old replica stops, the queue runs on
	ostop()
	<-odone
	if err := insp.UnpauseQueue(other); err != nil {
		t.Fatal(err)
	}
	var state string
	poll.Until(10*time.Second, func() bool {
		info, err := insp.GetTaskInfo(other, id)
		if err != nil {
			state = err.Error()
			return false
		}
		state = info.State.String()
		return info.State == asynq.TaskStateArchived || info.State == asynq.TaskStateCompleted
	})
	t.Errorf("the tick's task after the old replica stopped: %s", state)
}

// Schedule: a tick of the removed job (every second) claimed and dispatched
// by the old replica at about the instant of StopClaiming. Once Retirable
// says "", no task of it may land afterwards: the replica is stopped at
// once, and a task landing later would be archived by the new worker.
func TestRetireDispatchAtStopClaiming(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	load := func(jobs string) *config.Config {
		t.Helper()
		cfg, err := config.Load([]byte(fmt.Sprintf("redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: rr3\n"+
			"worker: {queues: {default: 1}, poll_interval: 100ms}\njobs:\n%s", srv.Addr(), jobs)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	keep := "  - name: keep\n    schedule: \"@every 1h\"\n    exec: {command: [\"true\"]}\n"
	cfg := load(keep + "  - name: gone\n    schedule: \"@every 1s\"\n    exec: {command: [\"sleep\", \"0.3\"]}\n")
	next := load(keep)
	queue := cfg.QueueName("default")
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	goneTasks := func() []string {
		var out []string
		for _, list := range []func(string, ...asynq.ListOption) ([]*asynq.TaskInfo, error){
			insp.ListPendingTasks, insp.ListActiveTasks, insp.ListScheduledTasks, insp.ListRetryTasks} {
			ts, err := list(queue)
			if err != nil {
				continue
			}
			for _, ti := range ts {
				out = append(out, ti.ID+"("+ti.State.String()+")")
			}
		}
		return out
	}
	for i, offset := range []time.Duration{0, 10 * time.Millisecond, 200 * time.Millisecond} {
		old, err := baton.New(cfg, baton.WithReplicaID(fmt.Sprintf("old%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		octx, ostop := context.WithCancel(ctx)
		odone := make(chan error, 1)
		go func() { odone <- old.Run(octx) }()
		poll.Require(t, 10*time.Second, "running", func() bool { return old.Ready(ctx) == "" })
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(2*time.Second + offset))) // real time: offset into a second; ticks fall due by the masters' clocks
		old.StopClaiming()
		start := time.Now()
		if !poll.Until(10*time.Second, func() bool { w, err := old.Retirable(ctx, next); return err == nil && w == "" }) {
			t.Logf("offset %s: not retirable within 10s", offset)
		}
		after := goneTasks()
		ostop()
		<-odone
		time.Sleep(300 * time.Millisecond) // real time: a dispatch still in flight when Run returned would land in the queue within this window
		if done, err := insp.ListCompletedTasks(queue); err == nil {
			t.Logf("offset %s: %d completed tasks so far, retirable after %s", offset, len(done), time.Since(start).Round(time.Millisecond))
		}
		if late := goneTasks(); len(late) > 0 {
			t.Errorf("offset %s: retirable after %s, and then the queue holds %v (at the check: %v)", offset, time.Since(start).Round(time.Millisecond), late, after)
		}
	}
}
