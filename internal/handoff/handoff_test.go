package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/chain"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

func TestDispatchEnqueuesOnceWithOptions(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
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
	d := New(cfg, e.Client, nil)
	tick := worktest.TickOf("report", 1)
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
	info, err := e.Insp.GetTaskInfo("baton:critical", tick.ID())
	if err != nil {
		t.Fatal(err)
	}
	if info.Type != TaskType || info.State != asynq.TaskStatePending || info.Timeout != 90*time.Minute ||
		info.MaxRetry != 3 || info.Retention != cfg.Retention(job) || info.Queue != "baton:critical" {
		t.Errorf("task info %+v (retention want %s)", info, cfg.Retention(job))
	}
	var p Payload
	if err := json.Unmarshal(info.Payload, &p); err != nil {
		t.Fatal(err)
	}
	// a trigger's task expires its run window after its dispatch
	if exp := time.UnixMilli(p.Exp); exp.Before(start.Truncate(time.Millisecond).Add(RunWindow(cfg, job))) || exp.After(time.Now().Add(RunWindow(cfg, job))) {
		t.Errorf("payload expiry %s, want its dispatch + %s", exp, RunWindow(cfg, job))
	}
	p.Exp = 0
	want := Payload{V: plainPayload, Job: "report", Tick: tick.At.Format(time.RFC3339), RunID: tick.RunID, Fence: tick.Fence, Replica: "sched-1", Manual: true, Namespace: "baton", Queue: "baton:critical"}
	if !reflect.DeepEqual(p, want) { // no trace member: the dispatch is not traced
		t.Errorf("payload %+v, want %+v", p, want)
	}
	if q, err := e.Insp.GetQueueInfo("baton:critical"); err != nil || q.Size != 1 {
		t.Errorf("queue size %v, %v: want 1 task", q, err)
	}

	quick := worktest.TickOf("quick", 1)
	if err := d.Dispatch(context.Background(), quick); err != nil {
		t.Fatal(err)
	}
	if info, err := e.Insp.GetTaskInfo("baton:default", quick.ID()); err != nil || info.Timeout != 2*time.Second {
		t.Errorf("sub-second timeout: %+v, %v; want 2s (rounded up)", info, err)
	}
}

func TestDispatchErrors(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: pump
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
	d := New(cfg, e.Client, nil)
	for _, tc := range []struct {
		tick scheduler.Tick
		want string
	}{
		{worktest.TickOf("nope", 1), `handoff: dispatch ` + worktest.TickOf("nope", 1).ID() + `: unknown job`},
		{worktest.TickOf("pump", 1), `mode singleton is not dispatched`},
		{worktest.TickOf("loc", 1), `no local runner`},
	} {
		if err := d.Dispatch(context.Background(), tc.tick); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Dispatch(%s) = %v, want %q", tc.tick.ID(), err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.Dispatch(ctx, worktest.TickOf("report", 1)); err == nil || !strings.Contains(err.Error(), worktest.TickOf("report", 1).ID()) {
		t.Errorf("Dispatch with a cancelled context = %v", err)
	}
}

func TestTaskTimeout(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, NoTimeout},
		{time.Millisecond, time.Second},
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{time.Hour, time.Hour},
	} {
		if got := TaskTimeout(tc.in); got != tc.want {
			t.Errorf("TaskTimeout(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParseTaskRejects(t *testing.T) {
	for _, task := range []*asynq.Task{
		asynq.NewTask("other", []byte(`{}`)),
		asynq.NewTask(TaskType, []byte(`nope`)),
		asynq.NewTask(TaskType, []byte(`{"job":"a","tick":"yesterday"}`)),
		asynq.NewTask(TaskType, []byte(`{"tick":"2026-01-01T00:00:00Z"}`)),
	} {
		if _, err := ParseTask(task); err == nil {
			t.Errorf("ParseTask(%s %s) succeeded", task.Type(), task.Payload())
		}
	}
}

// env is one real Redis with the clients a hand-off test needs.
type env struct{ *worktest.Env }

func newEnv(t testing.TB, opts ...redistest.Option) *env { return &env{worktest.NewEnv(t, opts...)} }

// dispatch hands tick t off through a Sender, as the scheduler does (a
// tick already enqueued counts as dispatched, as it does for the scheduler).
func (e *env) dispatch(t testing.TB, cfg *config.Config, tick scheduler.Tick) {
	t.Helper()
	err := New(cfg, e.Client, nil).Dispatch(context.Background(), tick)
	if err != nil && !errors.Is(err, scheduler.ErrAlreadyDispatched) {
		t.Fatal(err)
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
				return e.Config(t, fmt.Sprintf("  - name: capped\n    schedule: \"@every 1m\"\n    %s\n    handler: {name: capped}\n", limit))
			}
			cfgs := map[string]*config.Config{"old": list(tc.old), "new": list(tc.new)}
			disp := map[string]*Sender{}
			rosters := map[string]*roster.Roster{}
			for name, cfg := range cfgs {
				disp[name] = New(cfg, e.Client, nil, WithQueueRedis(e.RDB), WithLogger(worktest.Logger(t)))
				rosters[name] = roster.New(e.RDB, cfg, roster.Member{ID: name, Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
				if _, err := rosters[name].Beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for m := 1; m <= 2; m++ {
				if err := disp["old"].Dispatch(ctx, worktest.TickOf("capped", m)); err != nil {
					t.Fatalf("tick %d: %v", m, err)
				}
			}
			t3 := worktest.TickOf("capped", 3)
			if err := disp[tc.first].Precheck(ctx, t3); !errors.Is(err, scheduler.ErrLeftToOthers) {
				t.Fatalf("Precheck of tick 3 on the %s list = %v, want ErrLeftToOthers", tc.first, err)
			}
			if err := disp[tc.first].Dispatch(ctx, t3); !errors.Is(err, scheduler.ErrLeftToOthers) {
				t.Fatalf("tick 3 on the %s list = %v, want ErrLeftToOthers (the %s list takes it)", tc.first, err, tc.runsOn)
			}
			if _, err := e.Insp.GetTaskInfo(cfgs["old"].QueueName("default"), t3.ID()); err == nil {
				t.Fatal("tick 3 was enqueued by the list it is done for")
			}
			if err := disp[tc.runsOn].Dispatch(ctx, t3); err != nil {
				t.Fatalf("tick 3 on the %s list: %v", tc.runsOn, err)
			}
			// the list that takes more leaves: the job is done by every live list
			if err := rosters[tc.runsOn].Leave(ctx); err != nil {
				t.Fatal(err)
			}
			if err := disp[tc.first].Dispatch(ctx, worktest.TickOf("capped", 4)); !errors.Is(err, scheduler.ErrJobDone) {
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
	cfg := e.Config(t, `  - name: twice
    schedule: "@every 1m"
    max_runs: 2
    handler: {name: twice}
`)
	d := New(cfg, e.Client, nil, WithQueueRedis(e.RDB), WithLogger(worktest.Logger(t)))
	ctx := context.Background()
	key := RunCountKeys("baton", "twice")[0]
	for _, v := range []string{"9223372036854775807", "9007199254740992", "abc", "1.5", "-5"} {
		if err := e.RDB.Set(ctx, key, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		err := d.Dispatch(ctx, worktest.TickOf("twice", 1))
		var ce *jobs.CorruptError
		if !errors.Is(err, jobs.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != key || ce.Value != v {
			t.Fatalf("dispatch on run count %q = %v, want ErrCorrupt naming %q", v, err, key)
		}
		if errors.Is(err, scheduler.ErrJobDone) {
			t.Fatalf("dispatch on run count %q = %v: a corrupt count is not the job's end", v, err)
		}
		if got, _ := e.RDB.Get(ctx, key).Result(); got != v {
			t.Fatalf("run count %q changed to %q", v, got)
		}
	}
	if err := e.RDB.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(ctx, worktest.TickOf("twice", 1)); err != nil {
		t.Fatalf("dispatch after the count was deleted: %v", err)
	}
}

// cappedLists is a redis-server whose clock the test steps, and two
// replicas' rosters on it, both beaten: self, whose list caps job "capped"
// at max_runs 2, and other, whose list says 5; d is self's dispatcher.
type cappedLists struct {
	clock       *redistest.Clock
	rdb         *redis.Client
	self, other *roster.Roster
	d           *Sender
	job         *config.Job
}

func newCappedLists(t *testing.T) *cappedLists {
	t.Helper()
	c := &cappedLists{clock: redistest.NewTestClock(t)}
	srv := redistest.New(t, redistest.WithClock(c.clock))
	c.rdb = srv.TestClient(t)
	e := &worktest.Env{Srv: srv}
	oldCfg := e.Config(t, "  - {name: capped, schedule: \"@every 1m\", max_runs: 2, handler: {name: capped}}\n")
	newCfg := e.Config(t, "  - {name: capped, schedule: \"@every 1m\", max_runs: 5, handler: {name: capped}}\n")
	c.self = roster.New(c.rdb, oldCfg, roster.Member{ID: "old", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
	c.other = roster.New(c.rdb, newCfg, roster.Member{ID: "new", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
	for _, r := range []*roster.Roster{c.other, c.self} {
		if _, err := r.Beat(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	c.d = New(oldCfg, nil, nil, WithQueueRedis(c.rdb))
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
	if _, err := c.self.Beat(context.Background()); err != nil {
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
	entry, err := c.rdb.HGet(ctx, roster.Keys("baton")[0], c.other.Field()).Result()
	if err != nil {
		t.Fatal(err)
	}
	_, js, _ := strings.Cut(entry, " ")
	earlier := time.Now().Add(c.clock.Offset() - 1500*time.Millisecond).UnixMilli()
	if err := c.rdb.HSet(ctx, roster.Keys("baton")[0], c.other.Field(), strconv.FormatInt(earlier, 10)+" "+js).Err(); err != nil {
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
	cfg := e.Config(t, `  - name: twice
    schedule: "@every 1m"
    max_runs: 2
    handler: {name: twice}
`)
	p := redistest.NewTestProxy(t, e.Srv.Addr())
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: p.Addr()})
	defer client.Close()
	d := New(cfg, client, nil, WithQueueRedis(e.RDB), WithLogger(worktest.Logger(t)))
	proxied := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer proxied.Close()
	d.enq = newEnqueuer(proxied) // the enqueue goes through the proxy
	ctx := context.Background()
	t1, t2, t3 := worktest.TickOf("twice", 1), worktest.TickOf("twice", 2), worktest.TickOf("twice", 3)
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
	if _, err := e.Insp.GetTaskInfo(queue, t2.ID()); err != nil {
		t.Fatalf("tick 2's task is not in the queue (the schedule needs it there): %v", err)
	}

	err3 := d.Dispatch(ctx, t3)
	err2 := d.Dispatch(ctx, t2) // the scheduler's retry of tick 2
	t.Logf("tick 3: %v; tick 2 again: %v", err3, err2)

	var queued []string
	for _, tk := range []scheduler.Tick{t1, t2, t3} {
		if _, err := e.Insp.GetTaskInfo(queue, tk.ID()); err == nil {
			queued = append(queued, tk.ID())
		}
	}
	if len(queued) > 2 {
		n, _ := e.RDB.Get(ctx, RunCountKeys("baton", "twice")[0]).Int()
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
	cfg := e.Config(t, `  - name: five
    schedule: "@every 1s"
    max_runs: 5
    handler: {name: five}
`)
	d := New(cfg, e.Client, nil, WithQueueRedis(e.RDB))
	d2 := New(cfg, e.Client, nil, WithQueueRedis(e.RDB))
	// ticks a second apart: all within the counted ticks' window (the
	// job's retention), as ticks claimed within the starting deadline are
	sec := func(n int) scheduler.Tick {
		tk := worktest.TickOf("five", 0)
		tk.At = tk.At.Add(time.Duration(n) * time.Second)
		return tk
	}
	type result struct {
		tick int
		err  error
	}
	results := make(chan result, 40)
	for m := 1; m <= 20; m++ {
		for _, disp := range []*Sender{d, d2} {
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
		_, err := e.Insp.GetTaskInfo(queue, sec(m).ID())
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
	n, err := e.RDB.Get(context.Background(), RunCountKeys("baton", "five")[0]).Int()
	if enqueued != 5 || err != nil || n != 5 {
		t.Errorf("%d ticks enqueued, count %d (%v), want 5 and 5", enqueued, n, err)
	}
}

// A tick decided not to run is written to the history once, whichever
// replicas' claims found it so: every one of them records it, since the
// replica that decided it may have died before it wrote its record. A
// backfill's decision is a record of its own.
func TestNotRunRecordedOncePerTick(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	ctx := context.Background()
	d := New(cfg, e.Client, nil, WithQueueRedis(e.RDB))
	missed, paused := worktest.TickOf("report", 1), worktest.TickOf("report", 2)
	for _, replica := range []string{"sched-1", "sched-2", "sched-3"} {
		missed.Replica, paused.Replica = replica, replica
		d.NotDispatched(ctx, missed, false, "past its starting deadline")
		d.NotDispatched(ctx, paused, true, "the job is paused")
	}
	backfill := worktest.TickOf("report", 1)
	backfill.Backfill = true
	d.NotDispatched(ctx, backfill, false, "past its starting deadline")
	events, err := e.RDB.XRange(ctx, runlog.Key("baton", "report"), "-", "+").Result()
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

// A sender built without WithLogger still has a (discarding) logger.
func TestSenderWithoutLoggerHasOne(t *testing.T) {
	if d := New(&config.Config{}, nil, nil, WithLogger(nil)); d.log == nil {
		t.Error("sender without WithLogger has a nil logger")
	}
}

// Schedule: 16 ticks are dispatched at once through a queue Redis 300 ms
// away, longer than the queue names' freshness (queuesFresh, 250 ms). One
// dispatch reads asynq's queues; the others wait for that read and must
// take what it brought, though it is stale on arrival: had each waiter
// found it stale and read again, the dispatches would go one per round
// trip and the last would miss its deadline (the tick lease ttl).
func TestQueuesReadSlowerThanItsFreshnessServesEveryWaiter(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    handler: {name: report}
`)
	ctx := context.Background()
	if err := e.RDB.SAdd(ctx, AsynqQueuesKey, "baton:default").Err(); err != nil {
		t.Fatal(err)
	}
	p := redistest.NewTestProxy(t, e.Srv.Addr())
	queue := redis.NewClient(&redis.Options{Addr: p.Addr(), PoolSize: 20, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = queue.Close() })
	var warm sync.WaitGroup // every connection of the pool dialled before the latency
	for range 20 {
		warm.Go(func() { _ = queue.Ping(ctx).Err() })
	}
	warm.Wait()
	if err := p.AddLatency(300*time.Millisecond, true); err != nil {
		t.Fatal(err)
	}
	d := New(cfg, e.Client, nil, WithQueueRedis(queue))
	before := redistest.CommandCalls(t, e.RDB)["smembers"]
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second) // the scheduler's bound: the tick lease ttl
			defer cancel()
			errs[i] = d.Dispatch(dctx, worktest.TickOf("report", i))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("tick %d: %v", i, err)
		}
	}
	// one read, or two where a dispatch came after the first read ended
	if reads := redistest.CommandCalls(t, e.RDB)["smembers"] - before; reads > 2 {
		t.Errorf("%d dispatches read asynq's queues %d times, want once (each waiter takes the read it waited for)", n, reads)
	}
}

// A runtime schedule's max_runs count is its incarnation's (JobRunCountKeys:
// by its created): a schedule deleted and put again under its id counts
// anew, and what a replica still following the deleted one dispatches of
// it counts toward the deleted one, not into its successor's count.
func TestMaxRunsCountIsTheScheduleIncarnations(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: twice
    schedule: "@every 1m"
    max_runs: 2
    handler: {name: twice}
`)
	ctx := context.Background()
	old := *cfg
	old.Jobs = append([]config.Job(nil), cfg.Jobs...)
	old.Jobs[0].Created = time.UnixMilli(1_700_000_000_000)
	renewed := *cfg
	renewed.Jobs = append([]config.Job(nil), cfg.Jobs...)
	renewed.Jobs[0].Created = time.UnixMilli(1_700_000_100_000)
	lagging := New(&old, e.Client, nil, WithQueueRedis(e.RDB), WithLogger(worktest.Logger(t)))
	current := New(&renewed, e.Client, nil, WithQueueRedis(e.RDB), WithLogger(worktest.Logger(t)))
	// the successor's first tick, then the lagging replica dispatches two
	// of the deleted one's
	if err := current.Dispatch(ctx, worktest.TickOf("twice", 1)); err != nil {
		t.Fatal(err)
	}
	for m := 2; m <= 3; m++ {
		if err := lagging.Dispatch(ctx, worktest.TickOf("twice", m)); err != nil {
			t.Fatalf("the deleted incarnation's tick %d: %v", m, err)
		}
	}
	// the successor still has its second run
	if err := current.Dispatch(ctx, worktest.TickOf("twice", 4)); err != nil {
		t.Fatalf("the successor's second tick: %v (the deleted one's ticks counted into it)", err)
	}
	if err := current.Dispatch(ctx, worktest.TickOf("twice", 5)); !errors.Is(err, scheduler.ErrJobDone) {
		t.Fatalf("the successor's third tick: %v, want ErrJobDone", err)
	}
	if k := JobRunCountKeys("baton", &renewed.Jobs[0])[0]; k != "baton:{twice}:runs:1700000100000:count" {
		t.Errorf("the incarnation's count key %q", k)
	}
}

// The task of a job naming a limit has time for its run to wait for a slot
// (up to its starting deadline) and then run to its timeout: the run's own
// timeout starts when it starts.
func TestATaskOfAJobNamingALimitHasTimeToWaitForASlot(t *testing.T) {
	e := newEnv(t)
	y := "limits: {warehouse: 1}\n" + e.YAML(`  - name: limited
    schedule: "@every 1m"
    limit: warehouse
    timeout: 1500ms
    starting_deadline: 10m
    handler: {name: limited}
`)
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	tick := worktest.TickOf("limited", 1)
	if err := New(cfg, e.Client, nil).Dispatch(context.Background(), tick); err != nil {
		t.Fatal(err)
	}
	info, err := e.Insp.GetTaskInfo("baton:default", tick.ID())
	if want := 10*time.Minute + 2*time.Second; err != nil || info.Timeout != want {
		t.Errorf("task timeout %+v, %v; want %s (starting_deadline + timeout)", info, err, want)
	}
	job, _ := cfg.Job("limited")
	if w := RunWindow(cfg, job); w < 4*(10*time.Minute+2*time.Second) {
		t.Errorf("run window %s does not count the attempts' waits for a slot", w)
	}
}

// A tick that one replica lets go as missed (its claim held back by an
// outage) while another replica dispatched it, and whose run succeeded,
// keeps its successful outcome: the job run after it is not skipped for
// a miss that did not happen.
func TestATickLetGoAsMissedAfterItRanKeepsItsSuccessfulOutcome(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1m"
    exec: {command: ["true"]}
  - name: load
    after: [extract]
    exec: {command: ["true"]}
`)
	ctx := context.Background()
	tick := worktest.TickOf("extract", 1)
	// the run's end, as the worker writes it
	if err := chain.Record(ctx, e.RDB, "baton", "extract", tick.At, OutcomeTTL(cfg, "extract"), chain.Outcome{Status: jobs.StatusOK}); err != nil {
		t.Fatal(err)
	}
	New(cfg, e.Client, nil, WithQueueRedis(e.RDB)).NotDispatched(ctx, tick, false, "held back by an outage beyond the newest 1000 ticks held for the job: let go as missed")
	got, err := chain.Read(ctx, e.RDB, "baton", []string{"extract"}, tick.At)
	if err != nil {
		t.Fatal(err)
	}
	if o := got["extract"]; !o.OK() {
		t.Errorf("extract's outcome %+v, want ok", o)
	}
}

// The outcome record of a parent's tick lives as long as a task of its
// child's tick may start: the child's starting deadline (its wait for its
// parents), then its timeouts and retries (TickBound).
func TestAnOutcomeRecordLivesAsLongAsItsChildsTaskMayStart(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, `  - name: extract
    schedule: "@every 1m"
    exec: {command: ["true"]}
  - name: load
    after: [extract]
    timeout: 2h
    exec: {command: ["true"]}
  - name: report
    after: [extract]
    exec: {command: ["true"]}
`)
	load, _ := cfg.Job("load")
	if d, want := OutcomeTTL(cfg, "extract"), TickBound(cfg, load); d < want {
		t.Errorf("extract's outcome records live %s, load's task may start until %s after its tick", d, want)
	}
	if w := RunWindow(cfg, load); w < load.StartingDeadline+4*2*time.Hour {
		t.Errorf("load's run window %s does not count its wait for its parents", w)
	}
	if d := OutcomeTTL(cfg, "load"); d != 0 {
		t.Errorf("load, which no job runs after, keeps outcome records %s", d)
	}
}
