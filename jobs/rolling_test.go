package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/scheduler"
)

// Rolling deploys: replicas with different job lists side by side.

// TestAsynqKeyLayout guards the two asynq names the dispatcher reads to find
// a tick's task in another queue.
func TestAsynqKeyLayout(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: report
    schedule: "@every 1m"
    queue: critical
    handler: {name: report}
`, "{queues: {critical: 1}}")
	tick := tickOf("report", 1)
	e.dispatch(t, cfg, tick)
	ctx := context.Background()
	if n := e.rdb.Exists(ctx, asynqTaskKey("baton:critical", tick.ID())).Val(); n != 1 {
		t.Errorf("asynq's task key %q not found: asynq's layout changed", asynqTaskKey("baton:critical", tick.ID()))
	}
	if !e.rdb.SIsMember(ctx, asynqQueuesKey, "baton:critical").Val() {
		t.Errorf("asynq's queue set %q does not list the queue: asynq's layout changed", asynqQueuesKey)
	}
}

// A job moved to another queue (or to local mode) by a new job list: a tick
// the old list enqueued into its queue is neither enqueued into the new
// queue nor run locally by a replica with the new list (asynq's task IDs are
// unique within one queue only).
func TestTickEnqueuedOnceAcrossQueues(t *testing.T) {
	e := newEnv(t)
	jobOn := func(queue, mode string) *config.Config {
		return e.config(t, `  - name: report
    schedule: "@every 1m"
    queue: `+queue+`
    mode: `+mode+`
    handler: {name: report}
`, "{queues: {old: 1, new: 1}}")
	}
	oldCfg, newCfg := jobOn("old", "cron"), jobOn("new", "cron")
	localCfg := e.config(t, `  - name: report
    schedule: "@every 1m"
    mode: local
    handler: {name: report}
`)
	tick := tickOf("report", 1)
	if err := NewDispatcher(oldCfg, e.client, nil, WithQueueRedis(e.rdb)).Dispatch(context.Background(), tick); err != nil {
		t.Fatal(err)
	}
	// without the queue Redis the dispatcher cannot look: the old behaviour
	// enqueues the tick a second time, into the other queue
	other := tickOf("report", 2)
	if err := NewDispatcher(oldCfg, e.client, nil).Dispatch(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	newD := NewDispatcher(newCfg, e.client, nil, WithQueueRedis(e.rdb))
	err := newD.Dispatch(context.Background(), tick)
	if !errors.Is(err, scheduler.ErrAlreadyDispatched) || !strings.Contains(err.Error(), `"old"`) {
		t.Fatalf("new list's Dispatch = %v, want ErrAlreadyDispatched naming queue old", err)
	}
	if _, err := e.insp.GetTaskInfo("baton:new", tick.ID()); err == nil {
		t.Errorf("the tick was enqueued into the new queue too")
	}
	runner := &countingRunner{}
	localD := NewDispatcher(localCfg, e.client, runner, WithQueueRedis(e.rdb))
	if err := localD.Dispatch(context.Background(), tick); !errors.Is(err, scheduler.ErrAlreadyDispatched) {
		t.Fatalf("local Dispatch = %v, want ErrAlreadyDispatched", err)
	}
	if runner.n.Load() != 0 {
		t.Errorf("the enqueued tick was also run locally")
	}
	// a tick nobody enqueued runs where the new list says
	fresh := tickOf("report", 3)
	if err := newD.Dispatch(context.Background(), fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := e.insp.GetTaskInfo("baton:new", fresh.ID()); err != nil {
		t.Errorf("tick not in the new queue: %v", err)
	}
	if err := localD.Dispatch(context.Background(), tickOf("report", 4)); err != nil || runner.n.Load() != 1 {
		t.Errorf("local Dispatch of a fresh tick = %v, runs %d", err, runner.n.Load())
	}
}

type countingRunner struct{ n atomic.Int32 }

func (c *countingRunner) RunLocal(context.Context, *config.Job, scheduler.Tick) error {
	c.n.Add(1)
	return nil
}

// A worker whose job list lacks a job (or has it in another mode) hands the
// job's tasks back, spending no attempt, while a live replica's list has it,
// even with max_retry 0; a replica that knows the job then runs each tick
// once. With no live replica that can, the task is archived with a clear
// line.
func TestTaskHandedBackToAReplicaThatKnowsTheJob(t *testing.T) {
	e := newEnv(t)
	oldCfg := e.config(t, `  - name: known
    schedule: "@every 1m"
    handler: {name: known}
  - name: moved
    schedule: "@every 1m"
    mode: local
    handler: {name: moved}
`)
	newCfg := e.config(t, `  - name: known
    schedule: "@every 1m"
    handler: {name: known}
  - name: added
    schedule: "@every 1m"
    max_retry: 0
    handler: {name: added}
  - name: moved
    schedule: "@every 1m"
    max_retry: 0
    handler: {name: moved}
`)
	oldExec := newFakeExec(nil)
	logs := &logBuf{}
	old := e.worker(t, oldCfg, oldExec, WithReplica("old"), WithLogger(logs.logger()))

	// a replica with the new list is about to start: its roster entry is
	// live, its worker not fetching yet
	newSelf := newRoster(e.rdb, newCfg, Member{ID: "new", Role: "run", Queues: []string{"default"}}, testLogger(t))
	if _, err := newSelf.beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	added, moved := tickOf("added", 1), tickOf("moved", 1)
	e.dispatch(t, newCfg, added)
	e.dispatch(t, newCfg, moved)
	for _, tick := range []scheduler.Tick{added, moved} {
		poll.Require(t, wait, tick.ID()+" handed back", func() bool {
			info, err := e.insp.GetTaskInfo("baton:default", tick.ID())
			return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "handed back")
		})
		info, _ := e.insp.GetTaskInfo("baton:default", tick.ID())
		if info.Retried != 0 {
			t.Errorf("%s: hand-back spent an attempt: retried %d", tick.ID(), info.Retried)
		}
	}
	none(t, oldExec.started, 50*time.Millisecond, "a run of a job the old list cannot run")
	if got := logs.count("handing tasks of a job this replica cannot run back"); got != 2 {
		t.Errorf("hand-back logged %d times, want once per job:\n%s", got, logs.String())
	}
	if st := old.Stats(); st.Failed != 0 {
		t.Errorf("old worker stats %+v: a hand-back is no failure", st)
	}

	// the new replica's worker starts and runs each tick once
	newExec := newFakeExec(nil)
	e.worker(t, newCfg, newExec, WithReplica("new"))
	runs := map[string]int{}
	for range 2 {
		s := recv(t, newExec.started, "run of a handed-back tick")
		runs[s.run.Job]++
		if s.run.Attempt != 1 {
			t.Errorf("%s ran as attempt %d", s.run.Job, s.run.Attempt)
		}
	}
	if runs["added"] != 1 || runs["moved"] != 1 {
		t.Errorf("runs %v", runs)
	}
	e.state(t, "baton:default", added, asynq.TaskStateCompleted)
	e.state(t, "baton:default", moved, asynq.TaskStateCompleted)
	none(t, newExec.started, 100*time.Millisecond, "a second run")
	none(t, oldExec.started, 10*time.Millisecond, "a run on the old worker")

	// a job no live replica runs from this queue is archived
	ghost := tickOf("ghost", 1)
	task, err := newRunTask(newCfg, &config.Job{Name: "ghost", Queue: "default", Timeout: time.Minute, MaxRetry: 3}, ghost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	info := e.state(t, "baton:default", ghost, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "no live replica runs it") {
		t.Errorf("ghost: retried %d, last error %q", info.Retried, info.LastErr)
	}
}

// A replica that stops gracefully leaves the roster at once: tasks only it
// could run are archived, not handed back for minutes.
func TestRosterLeaveAndDiff(t *testing.T) {
	e := newEnv(t)
	a := e.config(t, `  - name: x
    schedule: "@every 1m"
    handler: {name: x}
  - name: y
    schedule: "@every 1m"
    handler: {name: y}
`)
	b := e.config(t, `  - name: x
    schedule: "@every 1m"
    handler: {name: x2}
  - name: z
    schedule: "@every 1m"
    queue: other
    handler: {name: z}
`, "{queues: {default: 1, other: 1}}")
	logs := &logBuf{}
	wa := e.worker(t, a, newFakeExec(nil), WithReplica("a"), WithReplicaInfo("v1", "run"), WithLogger(logs.logger()))
	wb := NewWorker(b, e.opt, e.locks, newFakeExec(nil), WithReplica("b"), WithReplicaInfo("v2", "worker"))
	if err := wb.Start(); err != nil {
		t.Fatal(err)
	}
	members, err := ReadRoster(context.Background(), e.rdb, a.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || members[0].ID != "a" || members[1].ID != "b" || !members[0].Live || !members[1].Live ||
		members[0].Version != "v1" || members[1].Role != "worker" || strings.Join(members[1].Queues, ",") != "default,other" {
		t.Fatalf("members %+v", members)
	}
	diff := DiffLists(members)
	var got []string
	for _, d := range diff {
		got = append(got, d.String())
	}
	// a job's definitions come sorted, here by digest
	xa, xb := `"cron default `+listJobs(a)["x"].Digest+`" on "a"`, `"cron default `+listJobs(b)["x"].Digest+`" on "b"`
	if xb < xa {
		xa, xb = xb, xa
	}
	want := []string{
		`"x": ` + xa + "; " + xb,
		`"y": absent on "b"; "cron default ` + listJobs(a)["y"].Digest + `" on "a"`,
		`"z": absent on "a"; "cron other ` + listJobs(b)["z"].Digest + `" on "b"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// a's next heartbeat warns about b's list, once
	poll.Require(t, wait, "the warning", func() bool { return logs.count("a live replica runs a different job list") == 1 })
	for range 2 { // more heartbeats: no second warning
		m, err := wa.roster.beat(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wa.roster.warnDiffering(m)
	}
	if n := logs.count("a live replica runs a different job list"); n != 1 {
		t.Errorf("warned %d times", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := wb.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	members, err = ReadRoster(context.Background(), e.rdb, a.Namespace)
	if err != nil || len(members) != 1 || members[0].ID != "a" {
		t.Fatalf("after b left: %+v, %v", members, err)
	}
	if DiffLists(members) != nil {
		t.Errorf("one list cannot differ")
	}
}

// logBuf captures a logger's lines (JSON, every level) for a test to read.
type logBuf struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   strings.Builder
}

func (b *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		var m map[string]any
		b.mu.Lock()
		defer b.mu.Unlock()
		b.raw.Write(p)
		if err := json.Unmarshal(p, &m); err == nil {
			b.lines = append(b.lines, m)
		}
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// all returns the lines so far.
func (b *logBuf) all() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.lines)
}

// count returns how many lines' messages contain msg.
func (b *logBuf) count(msg string) int {
	n := 0
	for _, l := range b.all() {
		if m, _ := l["msg"].(string); strings.Contains(m, msg) {
			n++
		}
	}
	return n
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.raw.String()
}
