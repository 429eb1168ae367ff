package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/scheduler"
)

func TestDispatchEnqueuesOnceWithOptions(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: report
    schedule: "@every 1m"
    timeout: 90m
    max_retry: 2
    starting_deadline: 2m
    queue: critical
    handler: {name: report}
  - name: quick
    schedule: "@every 1m"
    timeout: 1500ms
    handler: {name: quick}
`, "{queues: {critical: 2, default: 1}}")
	d := NewDispatcher(cfg, e.client, nil)
	tick := tickOf("report", 1)
	tick.Manual = true
	start := time.Now()
	if err := d.Dispatch(context.Background(), tick); err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	// the second dispatch of the tick finds it enqueued, and says so
	if err := d.Dispatch(context.Background(), tick); !errors.Is(err, scheduler.ErrAlreadyDispatched) {
		t.Fatalf("second Dispatch = %v, want ErrAlreadyDispatched", err)
	}
	job, _ := cfg.Job("report")
	info, err := e.insp.GetTaskInfo("baton:critical", tick.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != taskTypeRun || info.State != asynq.TaskStatePending || info.Timeout != 90*time.Minute ||
		info.MaxRetry != 3 || info.Retention != cfg.Retention(job) || info.Queue != "baton:critical" {
		t.Errorf("task info %+v (retention want %s)", info, cfg.Retention(job))
	}
	var p taskPayload
	if err := json.Unmarshal(info.Payload, &p); err != nil {
		t.Fatal(err)
	}
	// a trigger's task expires its run window after its dispatch
	if exp := time.UnixMilli(p.Exp); exp.Before(start.Truncate(time.Millisecond).Add(runWindow(cfg, job))) || exp.After(time.Now().Add(runWindow(cfg, job))) {
		t.Errorf("payload expiry %s, want its dispatch + %s", exp, runWindow(cfg, job))
	}
	p.Exp = 0
	want := taskPayload{V: formats.TaskPayload, Job: "report", Tick: tick.At.Format(time.RFC3339), RunID: tick.RunID, Fence: tick.Fence, Replica: "sched-1", Manual: true, Namespace: "baton", Queue: "baton:critical"}
	if p != want {
		t.Errorf("payload %+v, want %+v", p, want)
	}
	if q, err := e.insp.GetQueueInfo("baton:critical"); err != nil || q.Size != 1 {
		t.Errorf("queue size %v, %v: want 1 task", q, err)
	}

	quick := tickOf("quick", 1)
	if err := d.Dispatch(context.Background(), quick); err != nil {
		t.Fatal(err)
	}
	if info, err := e.insp.GetTaskInfo("baton:default", quick.ID()); err != nil || info.Timeout != 2*time.Second {
		t.Errorf("sub-second timeout: %+v, %v; want 2s (rounded up)", info, err)
	}
}

func TestDispatchErrors(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: pump
    mode: singleton
    handler: {name: pump}
  - name: loc
    schedule: "@every 1m"
    mode: local
    handler: {name: loc}
  - name: report
    schedule: "@every 1m"
    handler: {name: report}
`)
	d := NewDispatcher(cfg, e.client, nil)
	for _, tc := range []struct {
		tick scheduler.Tick
		want string
	}{
		{tickOf("nope", 1), `jobs: dispatch ` + tickOf("nope", 1).ID() + `: unknown job`},
		{tickOf("pump", 1), `mode singleton is not dispatched`},
		{tickOf("loc", 1), `no local runner`},
	} {
		if err := d.Dispatch(context.Background(), tc.tick); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Dispatch(%s) = %v, want %q", tc.tick.ID(), err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Dispatch(ctx, tickOf("report", 1)); err == nil || !strings.Contains(err.Error(), tickOf("report", 1).ID()) {
		t.Errorf("Dispatch with a cancelled context = %v", err)
	}
}

func TestDispatchLocalRunsInProcess(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: cleanup
    schedule: "@every 1m"
    mode: local
    handler: {name: cleanup}
`)
	exec := newFakeExec(nil)
	w := NewWorker(cfg, e.opt, e.locks, exec, WithLocalOnly(), WithReplica("sched-1"), WithLogger(testLogger(t)))
	d := NewDispatcher(cfg, e.client, w)
	tick := tickOf("cleanup", 1)
	if err := d.Dispatch(context.Background(), tick); err == nil {
		t.Error("Dispatch to a worker not started succeeded")
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(context.Background(), tick); err != nil {
		t.Fatal(err)
	}
	s := recv(t, exec.started, "local run")
	if s.run.Attempt != 1 || s.run.Replica != "sched-1" || !s.run.Tick.Equal(tick.At) || s.v == nil {
		t.Errorf("local run %+v, validity %v", s.run, s.v)
	}
	recv(t, exec.ended, "local run's end")
	if qs, _ := e.insp.Queues(); len(qs) != 0 {
		t.Errorf("a local run touched the queues: %v", qs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Ran != 1 {
		t.Errorf("stats %+v", st)
	}
	if err := d.Dispatch(context.Background(), tickOf("cleanup", 2)); err == nil {
		t.Error("Dispatch after Shutdown succeeded")
	}
}

func TestLocalDuplicateOfRunningTickIsSkipped(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: cleanup
    schedule: "@every 1m"
    mode: local
    handler: {name: cleanup}
`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec, WithLocalOnly())
	job, _ := cfg.Job("cleanup")
	tick := tickOf("cleanup", 1)
	if err := w.RunLocal(context.Background(), job, tick); err != nil {
		t.Fatal(err)
	}
	recv(t, exec.started, "local run")
	if err := w.RunLocal(context.Background(), job, tick); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, wait, "the duplicate to be skipped", func() bool { return w.Stats().Skipped == 1 })
	close(gate)
	recv(t, exec.ended, "local run's end")
}

func TestTaskTimeout(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, noTimeout},
		{time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{time.Hour, time.Hour},
	} {
		if got := taskTimeout(tc.in); got != tc.want {
			t.Errorf("taskTimeout(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParseTaskRejects(t *testing.T) {
	for _, task := range []*asynq.Task{
		asynq.NewTask("other", []byte(`{}`)),
		asynq.NewTask(taskTypeRun, []byte(`nope`)),
		asynq.NewTask(taskTypeRun, []byte(`{"job":"a","tick":"yesterday"}`)),
		asynq.NewTask(taskTypeRun, []byte(`{"tick":"2026-01-01T00:00:00Z"}`)),
	} {
		if _, err := parseTask(task); err == nil {
			t.Errorf("parseTask(%s %s) succeeded", task.Type(), task.Payload())
		}
	}
}

// A limit is decided per deployment, not per job list. Schedule: two live
// replicas run two lists side by side (a rolling deploy) that give one job
// different max_runs; ticks 1 and 2 run; tick 3 goes to the replica whose
// list says the job is done. While the other replica's list would still
// take it, the tick is left to it (released, never recorded done); once no
// live list takes it, it is done.
func TestMaxRunsDecidedAcrossLiveLists(t *testing.T) {
	for _, tc := range []struct {
		name     string
		old, new string // the job's max_runs line in each list ("" for none)
		first    string // which list gets tick 3 first: the one it is done for
		runsOn   string // the list that then runs tick 3
	}{
		{"raised from 2 to 5", "max_runs: 2", "max_runs: 5", "old", "new"},
		{"lowered from 5 to 2", "max_runs: 5", "max_runs: 2", "new", "old"},
		{"removed (was 2)", "max_runs: 2", "", "old", "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			list := func(limit string) *config.Config {
				return e.config(t, fmt.Sprintf("  - name: capped\n    schedule: \"@every 1m\"\n    %s\n    handler: {name: capped}\n", limit))
			}
			cfgs := map[string]*config.Config{"old": list(tc.old), "new": list(tc.new)}
			disp := map[string]*Dispatcher{}
			rosters := map[string]*roster{}
			for name, cfg := range cfgs {
				disp[name] = NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb), WithLogger(testLogger(t)))
				rosters[name] = newRoster(e.rdb, cfg, Member{ID: name, Role: "run", Queues: []string{"default"}}, testLogger(t))
				if _, err := rosters[name].beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for m := 1; m <= 2; m++ {
				if err := disp["old"].Dispatch(ctx, tickOf("capped", m)); err != nil {
					t.Fatalf("tick %d: %v", m, err)
				}
			}
			t3 := tickOf("capped", 3)
			if err := disp[tc.first].Precheck(ctx, t3); !errors.Is(err, scheduler.ErrLeftToOthers) {
				t.Fatalf("Precheck of tick 3 on the %s list = %v, want ErrLeftToOthers", tc.first, err)
			}
			if err := disp[tc.first].Dispatch(ctx, t3); !errors.Is(err, scheduler.ErrLeftToOthers) {
				t.Fatalf("tick 3 on the %s list = %v, want ErrLeftToOthers (the %s list takes it)", tc.first, err, tc.runsOn)
			}
			if _, err := e.insp.GetTaskInfo(cfgs["old"].QueueName("default"), t3.ID()); err == nil {
				t.Fatal("tick 3 was enqueued by the list it is done for")
			}
			if err := disp[tc.runsOn].Dispatch(ctx, t3); err != nil {
				t.Fatalf("tick 3 on the %s list: %v", tc.runsOn, err)
			}
			// the list that takes more leaves: the job is done by every live list
			if err := rosters[tc.runsOn].leave(ctx); err != nil {
				t.Fatal(err)
			}
			if err := disp[tc.first].Dispatch(ctx, tickOf("capped", 4)); !errors.Is(err, scheduler.ErrJobDone) {
				t.Fatalf("tick 4 with only the %s list live = %v, want ErrJobDone", tc.first, err)
			}
		})
	}
}

// A job's run count toward max_runs that holds no integer from 0 to 2^53-2
// fails the dispatch with ErrCorrupt naming the key: never read as zero
// (runs beyond max_runs), nor as "the job is done" (2^63-1: the job would
// stop for good), nor as a negative count.
func TestCorruptRunCountFailsDispatch(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: twice
    schedule: "@every 1m"
    max_runs: 2
    handler: {name: twice}
`)
	d := NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb), WithLogger(testLogger(t)))
	ctx := context.Background()
	key := RunCountKeys("baton", "twice")[0]
	for _, v := range []string{"9223372036854775807", "9007199254740992", "abc", "1.5", "-5"} {
		if err := e.rdb.Set(ctx, key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		err := d.Dispatch(ctx, tickOf("twice", 1))
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Key != key || ce.Value != v {
			t.Fatalf("dispatch on run count %q = %v, want ErrCorrupt naming %q", v, err, key)
		}
		if errors.Is(err, scheduler.ErrJobDone) {
			t.Fatalf("dispatch on run count %q = %v: a corrupt count is not the job's end", v, err)
		}
		if got, _ := e.rdb.Get(ctx, key).Result(); got != v {
			t.Fatalf("run count %q changed to %q", v, got)
		}
	}
	if err := e.rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(ctx, tickOf("twice", 1)); err != nil {
		t.Fatalf("dispatch after the count was deleted: %v", err)
	}
}

// cappedLists is a redis-server whose clock the test steps, and two
// replicas' rosters on it, both beaten: self, whose list caps job "capped"
// at max_runs 2, and other, whose list says 5; d is self's dispatcher.
type cappedLists struct {
	clock       *redistest.Clock
	rdb         *redis.Client
	self, other *roster
	d           *Dispatcher
	job         *config.Job
}

func newCappedLists(t *testing.T) *cappedLists {
	t.Helper()
	c := &cappedLists{clock: redistest.NewTestClock(t)}
	srv := redistest.New(t, redistest.WithClock(c.clock))
	c.rdb = srv.TestClient(t)
	e := &env{srv: srv}
	oldCfg := e.config(t, "  - {name: capped, schedule: \"@every 1m\", max_runs: 2, handler: {name: capped}}\n")
	newCfg := e.config(t, "  - {name: capped, schedule: \"@every 1m\", max_runs: 5, handler: {name: capped}}\n")
	c.self = newRoster(c.rdb, oldCfg, Member{ID: "old", Role: "run", Queues: []string{"default"}}, testLogger(t))
	c.other = newRoster(c.rdb, newCfg, Member{ID: "new", Role: "run", Queues: []string{"default"}}, testLogger(t))
	for _, r := range []*roster{c.other, c.self} {
		if _, err := r.beat(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c.d = NewDispatcher(oldCfg, nil, nil, WithQueueRedis(c.rdb))
	c.job, _ = oldCfg.Job("capped")
	return c
}

// doneHere asks self's dispatcher about a tick past its list's max_runs.
func (c *cappedLists) doneHere() error {
	return c.d.doneHere(context.Background(), c.job, 2, fmt.Errorf("capped ran its max_runs: %w", scheduler.ErrJobDone))
}

// A forward step of the queue Redis's clock, before any heartbeat has seen
// it, leaves a tick past this list's max_runs undecided (an error: tried
// again) rather than recording it done because the replica whose list would
// still run it looks dead; once a heartbeat has seen the step, the tick is
// left to that replica.
func TestQueueClockStepForwardLeavesMaxRunsUndecided(t *testing.T) {
	c := newCappedLists(t)
	if err := c.doneHere(); !errors.Is(err, scheduler.ErrLeftToOthers) {
		t.Fatalf("before the step: %v, want the tick left to the new list", err)
	}

	if err := c.clock.Step(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	err := c.doneHere()
	if err == nil || errors.Is(err, scheduler.ErrJobDone) || errors.Is(err, scheduler.ErrLeftToOthers) {
		t.Fatalf("after the step, before a heartbeat saw it: %v, want undecided", err)
	}
	if _, err := c.self.beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.doneHere(); !errors.Is(err, scheduler.ErrLeftToOthers) {
		t.Fatalf("after a heartbeat saw the step: %v, want the tick left to the new list", err)
	}
}

// A forward step of the queue Redis's clock shorter than the liveness
// window (a few seconds: an NTP step), before any heartbeat has seen it,
// makes a replica that beat a little earlier look dead while this one's
// own entry still looks live: the roster is not stale, and a tick past this
// list's max_runs must still be left to that replica's list, never
// recorded done.
func TestQueueClockStepOfSecondsLeavesMaxRunsToLiveList(t *testing.T) {
	ctx := context.Background()
	c := newCappedLists(t)
	// the new replica's last heartbeat was 1.5 s ago (they come every 2 s)
	entry, err := c.rdb.HGet(ctx, rosterKeys("baton")[0], c.other.self.key).Result()
	if err != nil {
		t.Fatal(err)
	}
	_, js, _ := strings.Cut(entry, " ")
	earlier := time.Now().Add(c.clock.Offset() - 1500*time.Millisecond).UnixMilli()
	if err := c.rdb.HSet(ctx, rosterKeys("baton")[0], c.other.self.key, strconv.FormatInt(earlier, 10)+" "+js).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.doneHere(); !errors.Is(err, scheduler.ErrLeftToOthers) {
		t.Fatalf("before the step: %v, want the tick left to the new list", err)
	}
	if err := c.clock.Step(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.doneHere(); errors.Is(err, scheduler.ErrJobDone) {
		t.Fatalf("after a 5 s step, before a heartbeat saw it: %v, want the tick left to the new list (or undecided)", err)
	}
}

// max_runs: exactly max_runs scheduled ticks are dispatched, whatever
// becomes of a dispatch's reply.

// Schedule (max_runs: 2):
//
//  1. tick 1 is dispatched: count 1.
//  2. tick 2 is counted (count 2) and its task enqueued, but the enqueue's
//     reply is lost (the link to the queue Redis is cut mid-command): the
//     Dispatcher sees an error that is not "task ID conflict" and takes the
//     count back (count 1), though the task is in the queue and will run.
//  3. tick 3 is dispatched (the next tick; or the policy's pick after the
//     queue outage, which records tick 2 missed): counted 2, enqueued.
//  4. the scheduler's retry of tick 2 (if any) is answered ErrJobDone.
//
// Three ticks are in the queue for a job with max_runs: 2.
func TestMaxRunsLostEnqueueReplyIsNotCountedBack(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: twice
    schedule: "@every 1m"
    max_runs: 2
    handler: {name: twice}
`)
	p := redistest.NewTestProxy(t, e.srv.Addr())
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: p.Addr()})
	defer client.Close()
	d := NewDispatcher(cfg, client, nil, WithQueueRedis(e.rdb), WithLogger(testLogger(t)))
	ctx := context.Background()
	t1, t2, t3 := tickOf("twice", 1), tickOf("twice", 2), tickOf("twice", 3)
	queue := cfg.QueueName("default")

	if err := d.Dispatch(ctx, t1); err != nil {
		t.Fatal(err)
	}
	// the reply to tick 2's enqueue is lost with its connection
	if err := p.CloseAfter(0, false); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := d.Dispatch(dctx, t2)
	cancel()
	if err == nil || errors.Is(err, scheduler.ErrAlreadyDispatched) {
		t.Fatalf("dispatch with the reply lost: %v, want an error", err)
	}
	t.Logf("tick 2's dispatch: %v", err)
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.insp.GetTaskInfo(queue, t2.ID()); err != nil {
		t.Fatalf("tick 2's task is not in the queue (the schedule needs it there): %v", err)
	}

	err3 := d.Dispatch(ctx, t3)
	err2 := d.Dispatch(ctx, t2) // the scheduler's retry of tick 2
	t.Logf("tick 3: %v; tick 2 again: %v", err3, err2)

	var queued []string
	for _, tk := range []scheduler.Tick{t1, t2, t3} {
		if _, err := e.insp.GetTaskInfo(queue, tk.ID()); err == nil {
			queued = append(queued, tk.ID())
		}
	}
	if len(queued) > 2 {
		n, _ := e.rdb.Get(ctx, RunCountKeys("baton", "twice")[0]).Int()
		t.Errorf("max_runs 2, but %d ticks are in the queue: %v (count %d); a count taken back after an "+
			"enqueue whose reply was lost lets a later tick take the slot of a tick that runs", len(queued), queued, n)
	}
}

// Schedule (max_runs: 5): 20 distinct ticks dispatched at once (a catch-up
// of "all" on several replicas), and each of them by two owners at once (an
// owner that took over a tick whose first owner died before committing).
// Exactly 5 ticks are enqueued and counted; the others are ErrJobDone; a
// tick counted is never refused to its second owner. (Held.)
func TestMaxRunsConcurrentDispatchesNearTheLimit(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: five
    schedule: "@every 1s"
    max_runs: 5
    handler: {name: five}
`)
	d := NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb))
	d2 := NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb))
	// ticks a second apart: all within the counted ticks' window (the
	// job's retention), as ticks claimed within the starting deadline are
	sec := func(n int) scheduler.Tick {
		tk := tickOf("five", 0)
		tk.At = tk.At.Add(time.Duration(n) * time.Second)
		return tk
	}
	type result struct {
		tick int
		err  error
	}
	results := make(chan result, 40)
	for m := 1; m <= 20; m++ {
		for _, disp := range []*Dispatcher{d, d2} {
			go func() { results <- result{m, disp.Dispatch(context.Background(), sec(m))} }()
		}
	}
	outcome := map[int][]error{}
	for range 40 {
		r := <-results
		outcome[r.tick] = append(outcome[r.tick], r.err)
	}
	queue := cfg.QueueName("default")
	enqueued := 0
	for m := 1; m <= 20; m++ {
		_, err := e.insp.GetTaskInfo(queue, sec(m).ID())
		in := err == nil
		if in {
			enqueued++
		}
		for _, err := range outcome[m] {
			done := errors.Is(err, scheduler.ErrJobDone)
			switch {
			case in && done:
				t.Errorf("tick %d is enqueued, but an owner was told the job is done (its owners: %v)", m, outcome[m])
			case !in && !done:
				t.Errorf("tick %d is not enqueued, and an owner was told %v (its owners: %v)", m, err, outcome[m])
			}
		}
	}
	n, err := e.rdb.Get(context.Background(), RunCountKeys("baton", "five")[0]).Int()
	if enqueued != 5 || err != nil || n != 5 {
		t.Errorf("%d ticks enqueued, count %d (%v), want 5 and 5", enqueued, n, err)
	}
}
