package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/schedstore"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// Rolling deploys: replicas with different job lists side by side.

// A worker whose job list lacks a job (or has it in another mode) hands the
// job's tasks back, spending no attempt, while a live replica's list has it,
// even with max_retry 0; a replica that knows the job then runs each tick
// once. With no live replica that can, the task is archived with a clear
// line.
func TestTaskHandedBackToAReplicaThatKnowsTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	oldCfg := e.Config(t, `  - name: known
    schedule: "@every 1m"
    handler: {name: known}
  - name: moved
    schedule: "@every 1m"
    mode: local
    handler: {name: moved}
`)
	newCfg := e.Config(t, `  - name: known
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
	logs := &worktest.Logs{}
	old := e.worker(t, oldCfg, oldExec, WithReplica("old"), WithLogger(logs.Logger()))

	// a replica with the new list is about to start: its roster entry is
	// live, its worker not fetching yet
	newSelf := roster.New(e.RDB, newCfg, roster.Member{ID: "new", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
	if _, err := newSelf.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	added, moved := worktest.TickOf("added", 1), worktest.TickOf("moved", 1)
	e.dispatch(t, newCfg, added)
	e.dispatch(t, newCfg, moved)
	for _, tick := range []scheduler.Tick{added, moved} {
		poll.Require(t, worktest.Wait, tick.ID()+" handed back", func() bool {
			info, err := e.Insp.GetTaskInfo("baton:default", tick.ID())
			return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "handed back")
		})
		info, _ := e.Insp.GetTaskInfo("baton:default", tick.ID())
		if info.Retried != 0 {
			t.Errorf("%s: hand-back spent an attempt: retried %d", tick.ID(), info.Retried)
		}
	}
	worktest.None(t, oldExec.started, 50*time.Millisecond, "a run of a job the old list cannot run")
	if got := logs.Count("handing tasks of a job this replica cannot run back"); got != 2 {
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
		s := worktest.Recv(t, newExec.started, "run of a handed-back tick")
		runs[s.run.Job]++
		if s.run.Attempt != 1 {
			t.Errorf("%s ran as attempt %d", s.run.Job, s.run.Attempt)
		}
	}
	if runs["added"] != 1 || runs["moved"] != 1 {
		t.Errorf("runs %v", runs)
	}
	e.State(t, "baton:default", added, asynq.TaskStateCompleted)
	e.State(t, "baton:default", moved, asynq.TaskStateCompleted)
	worktest.None(t, newExec.started, 100*time.Millisecond, "a second run")
	worktest.None(t, oldExec.started, 10*time.Millisecond, "a run on the old worker")

	// a job no live replica runs from this queue is archived
	ghost := worktest.TickOf("ghost", 1)
	task, err := handoff.NewRunTask(newCfg, &config.Job{Name: "ghost", Queue: "default", Timeout: time.Minute, MaxRetry: 3}, ghost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	info := e.State(t, "baton:default", ghost, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "no live replica runs it") {
		t.Errorf("ghost: retried %d, last error %q", info.Retried, info.LastErr)
	}
}

// A replica that stops gracefully leaves the roster at once: tasks only it
// could run are archived, not handed back for minutes.
func TestRosterLeaveAndDiff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.Config(t, `  - name: x
    schedule: "@every 1m"
    handler: {name: x}
  - name: y
    schedule: "@every 1m"
    handler: {name: y}
`)
	b := e.Config(t, `  - name: x
    schedule: "@every 1m"
    handler: {name: x2}
  - name: z
    schedule: "@every 1m"
    queue: other
    handler: {name: z}
`, "{queues: {default: 1, other: 1}}")
	logs := &worktest.Logs{}
	wa := e.worker(t, a, newFakeExec(nil), WithReplica("a"), WithReplicaInfo("v1", "run"), WithLogger(logs.Logger()))
	wb := New(b, e.Opt, e.Locks, newFakeExec(nil), WithReplica("b"), WithReplicaInfo("v2", "worker"))
	if err := wb.Start(); err != nil {
		t.Fatal(err)
	}
	members, err := roster.Read(context.Background(), e.RDB, a.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || members[0].ID != "a" || members[1].ID != "b" || !members[0].Live || !members[1].Live ||
		members[0].Version != "v1" || members[1].Role != "worker" || strings.Join(members[1].Queues, ",") != "default,other" {
		t.Fatalf("members %+v", members)
	}
	diff := roster.DiffLists(members)
	var got []string
	for _, d := range diff {
		got = append(got, d.String())
	}
	// a job's definitions come sorted, here by digest
	xa, xb := `"cron default `+roster.ListJobs(a)["x"].Digest+`" on "a"`, `"cron default `+roster.ListJobs(b)["x"].Digest+`" on "b"`
	if xb < xa {
		xa, xb = xb, xa
	}
	want := []string{
		`"x": ` + xa + "; " + xb,
		`"y": absent on "b"; "cron default ` + roster.ListJobs(a)["y"].Digest + `" on "a"`,
		`"z": absent on "a"; "cron other ` + roster.ListJobs(b)["z"].Digest + `" on "b"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// a's next heartbeat warns about b's list, once
	poll.Require(t, worktest.Wait, "the warning", func() bool { return logs.Count("a live replica runs a different job list") == 1 })
	for range 2 { // more heartbeats: no second warning
		m, err := wa.roster.Beat(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		wa.roster.WarnDiffering(m)
	}
	if n := logs.Count("a live replica runs a different job list"); n != 1 {
		t.Errorf("warned %d times", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
	defer cancel()
	if err := wb.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	members, err = roster.Read(context.Background(), e.RDB, a.Namespace)
	if err != nil || len(members) != 1 || members[0].ID != "a" {
		t.Fatalf("after b left: %+v, %v", members, err)
	}
	if roster.DiffLists(members) != nil {
		t.Errorf("one list cannot differ")
	}
}

// scheduleSource is a config.JobSource holding runtime schedules made in a
// test.
type scheduleSource map[string]*config.Job

func (s scheduleSource) ScheduleJob(name string) (*config.Job, bool) {
	j, ok := s[name]
	return j, ok
}

// withSchedule returns base with runtime schedule id, defined by doc, found
// beside its job list.
func withSchedule(t *testing.T, base *config.Config, id, doc string) *config.Config {
	t.Helper()
	return withSchedules(t, base, map[string]string{id: doc})
}

// withSchedules returns base with the runtime schedules of docs (by id)
// found beside its job list.
func withSchedules(t *testing.T, base *config.Config, docs map[string]string) *config.Config {
	t.Helper()
	src := scheduleSource{}
	for id, doc := range docs {
		j, err := config.DecodeSchedule(base, id, []byte(doc), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		src[j.Name] = j
	}
	return base.WithSource(src)
}

// runtimeQueue is the asynq queue of a runtime schedule's tasks in queue
// default of namespace baton with one lane (config.QueueFor).
const runtimeQueue = "baton:default#@"

// scheduleTick is tick n of a runtime schedule's job (its run id has no
// '@' or '/').
func scheduleTick(job string, n int) scheduler.Tick {
	tick := worktest.TickOf(job, n)
	tick.RunID = fmt.Sprintf("run-%d", n)
	return tick
}

// registry registers a handler under each name.
func registry(t *testing.T, names ...string) *jobs.Registry {
	t.Helper()
	reg := jobs.NewRegistry()
	for _, n := range names {
		if err := reg.HandleFunc(n, func(context.Context, jobs.Run) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// A rolling deploy where one replica lacks a runtime schedule's Go
// handler: a task it fetches is handed back (no attempt spent, nothing
// failed), and every tick runs once, on the replica that has the handler.
func TestRuntimeScheduleRunsOnlyOnAReplicaWithItsHandler(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := withSchedule(t, e.Config(t, "  []"), "report/x", `{schedule: "@every 1m", concurrency: allow, handler: {name: report}}`)
	execA := newFakeExec(nil)
	logs := &worktest.Logs{}
	a := e.worker(t, cfg, execA, WithReplica("a"), WithHandlers(registry(t, "other")), WithLogger(logs.Logger()))

	// b, which has the handler, is about to start: its roster entry is
	// live, its worker not fetching yet
	bSelf := roster.New(e.RDB, cfg, roster.Member{ID: "b", Role: "run", Queues: []string{"default"}, Handlers: []string{"report"}}, worktest.Logger(t))
	if _, err := bSelf.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := scheduleTick("@report/x", 1)
	e.dispatch(t, cfg, first)
	poll.Require(t, worktest.Wait, "the first tick handed back", func() bool {
		info, err := e.Insp.GetTaskInfo(runtimeQueue, first.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "handed back")
	})
	info, _ := e.Insp.GetTaskInfo(runtimeQueue, first.ID())
	if info.Retried != 0 || !strings.Contains(info.LastErr, `Go handler "report"`) {
		t.Errorf("handed back: retried %d, last error %q", info.Retried, info.LastErr)
	}
	if logs.Count("handing tasks of a job this replica cannot run back") != 1 {
		t.Errorf("hand-back not logged once:\n%s", logs.String())
	}

	execB := newFakeExec(nil)
	e.worker(t, cfg, execB, WithReplica("b"), WithHandlers(registry(t, "report")))
	ticks := []scheduler.Tick{first}
	for n := 2; n <= 6; n++ {
		tick := scheduleTick("@report/x", n)
		ticks = append(ticks, tick)
		e.dispatch(t, cfg, tick)
	}
	runs := map[string]int{}
	for range ticks {
		s := worktest.Recv(t, execB.started, "a run on b")
		runs[s.run.Tick.Format(time.RFC3339)]++
		if s.run.Job != "@report/x" || s.run.Attempt != 1 {
			t.Errorf("run %+v", s.run)
		}
	}
	for _, tick := range ticks {
		e.State(t, runtimeQueue, tick, asynq.TaskStateCompleted)
		if n := runs[tick.At.Format(time.RFC3339)]; n != 1 {
			t.Errorf("%s ran %d times", tick.ID(), n)
		}
	}
	worktest.None(t, execB.started, 100*time.Millisecond, "a second run")
	worktest.None(t, execA.started, 10*time.Millisecond, "a run on the replica without the handler")
	if st := a.Stats(); st.Failed != 0 || st.Ran != 0 {
		t.Errorf("a's stats %+v: a hand-back is no failure", st)
	}
}

// A runtime schedule's task that no live replica can run (none registers
// its handler) is archived at once, with a line in the log and a refused
// record in its history; a task of a runtime schedule that was deleted
// too.
func TestRuntimeScheduleNoLiveReplicaCanRunIsArchivedWithARecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	base := e.Config(t, "  []")
	cfg := withSchedule(t, base, "report/x", `{schedule: "@every 1m", handler: {name: report}}`)
	logs := &worktest.Logs{}
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec, WithReplica("a"), WithHandlers(registry(t, "other")), WithLogger(logs.Logger()))
	tick := scheduleTick("@report/x", 1)
	e.dispatch(t, cfg, tick)
	info := e.State(t, runtimeQueue, tick, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "no live replica runs it") {
		t.Errorf("retried %d, last error %q", info.Retried, info.LastErr)
	}
	recs := historyOf(t, e, "@report/x", 1, nil)
	if recs[0].Status != jobs.StatusRefused || !strings.Contains(recs[0].Reason, `Go handler "report"`) ||
		!strings.Contains(recs[0].Reason, "no live replica runs it") {
		t.Errorf("history record %+v", recs[0])
	}
	if logs.Count("archiving a task no live replica can run") != 1 {
		t.Errorf("archive not logged:\n%s", logs.String())
	}

	// deleted: this replica finds no such schedule, nor does the store
	gone := scheduleTick("@report/gone", 1)
	e.dispatch(t, withSchedule(t, base, "report/gone", `{schedule: "@every 1m", handler: {name: other}}`), gone)
	info = e.State(t, runtimeQueue, gone, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "its runtime schedule was deleted") {
		t.Errorf("deleted: retried %d, last error %q", info.Retried, info.LastErr)
	}
	recs = historyOf(t, e, "@report/gone", 1, nil)
	if recs[0].Status != jobs.StatusRefused || recs[0].Reason != "its runtime schedule was deleted" {
		t.Errorf("deleted: history record %+v", recs[0])
	}
	worktest.None(t, exec.started, 10*time.Millisecond, "a run")
}

// An http runtime schedule runs only where the config allows its URL: a
// replica whose schedules.http_prefixes refuse it hands its task to a live
// replica whose prefixes allow it, and archives it, with a record, when
// there is none.
func TestRuntimeHTTPScheduleGoesToAReplicaThatAllowsItsURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	load := func(prefix string) *config.Config {
		y := e.YAML("  []") + fmt.Sprintf("\nschedules: {http_prefixes: [%q]}\n", prefix)
		cfg, err := config.Load([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfgA, cfgB := load("https://a.example/"), load("https://b.example/hooks/")
	const doc = `{"schedule":"@every 1m","http":{"url":"https://b.example/hooks/1"}}`
	if _, err := schedstore.Of(e.RDB, cfgB).Put(context.Background(), "hook/1", []byte(doc), schedstore.Any); err != nil {
		t.Fatal(err)
	}
	cfgB = withSchedule(t, cfgB, "hook/1", doc)
	exec := newFakeExec(nil)
	logs := &worktest.Logs{}
	e.worker(t, cfgA, exec, WithReplica("a"), WithLogger(logs.Logger()))
	b := roster.New(e.RDB, cfgB, roster.Member{ID: "b", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
	if _, err := b.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
	first := scheduleTick("@hook/1", 1)
	e.dispatch(t, cfgB, first)
	poll.Require(t, worktest.Wait, "the tick handed back", func() bool {
		info, err := e.Insp.GetTaskInfo(runtimeQueue, first.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "handed back")
	})
	if info, _ := e.Insp.GetTaskInfo(runtimeQueue, first.ID()); info.Retried != 0 || !strings.Contains(info.LastErr, "http_prefixes") {
		t.Errorf("handed back: retried %d, last error %q", info.Retried, info.LastErr)
	}

	// b leaves: no live replica allows the URL
	if err := b.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := scheduleTick("@hook/1", 2)
	e.dispatch(t, cfgB, second)
	info := e.State(t, runtimeQueue, second, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "no live replica runs it") {
		t.Errorf("retried %d, last error %q", info.Retried, info.LastErr)
	}
	recs := historyOf(t, e, "@hook/1", 2, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusRefused })
	if !strings.Contains(recs[0].Reason, "http_prefixes") {
		t.Errorf("history record %+v", recs[0])
	}
	worktest.None(t, exec.started, 10*time.Millisecond, "a run on the replica that refuses the URL")
}

// reportSchedule returns how to put runtime schedule report/x on spec,
// an allow job of Go handler report whose payload is {"n": n}, and how to
// make a config whose copy holds a stored record of it.
func reportSchedule(t *testing.T, st *schedstore.Store, base *config.Config, spec string) (put func(n int) schedstore.Record, holding func(schedstore.Record) *config.Config) {
	put = func(n int) schedstore.Record {
		t.Helper()
		rec, err := st.Put(context.Background(), "report/x", []byte(fmt.Sprintf(`{"schedule":%q,"concurrency":"allow","handler":{"name":"report","payload":{"n":%d}}}`, spec, n)), schedstore.Any)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	holding = func(rec schedstore.Record) *config.Config {
		t.Helper()
		j, err := rec.Job(base)
		if err != nil {
			t.Fatal(err)
		}
		return base.WithSource(scheduleSource{j.Name: j})
	}
	return put, holding
}

// A runtime schedule's tick runs with the definition its task was
// dispatched for, whatever definition the worker's copy holds:
//
//   - a worker whose copy is behind a replace (it holds version 1, the
//     task names version 2) runs the tick with version 2, read from the
//     store, never with its version 1; a task that names version 1 it runs
//     with version 1;
//   - a worker whose copy holds version 2 runs a task dispatched for
//     version 1, due before or after the replacement, with version 2,
//     which has the tick (as a dispatcher that had seen the replacement
//     would have: a tick the two share runs once); replaced again by a
//     version without the tick, such a task is archived with a record;
//   - a worker whose copy still holds a schedule deleted and put again
//     runs the new schedule's tick with the new definition, and a worker
//     that holds the new one archives a task dispatched for the deleted
//     one, with a record.
func TestARuntimeScheduleTickRunsWithTheDefinitionItWasDispatchedFor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := e.Config(t, "  []")
	st := schedstore.Of(e.RDB, base)
	put, holding := reportSchedule(t, st, base, "@every 1s")
	// redisAfter waits until the store's clock is past at: what the store
	// records next is later than at
	redisAfter := func(at time.Time) {
		t.Helper()
		poll.Require(t, worktest.Wait, "the store's clock past "+at.Format(time.RFC3339Nano), func() bool {
			now, err := e.RDB.Time(ctx).Result()
			return err == nil && now.After(at)
		})
	}
	tickAt := func(at time.Time) scheduler.Tick {
		return scheduler.Tick{Job: "@report/x", At: at.UTC(), RunID: fmt.Sprintf("run-%d", at.UnixMilli()), Fence: 1, Replica: "sched-1"}
	}
	// dueAfter is the first whole second after at
	dueAfter := func(at time.Time) time.Time { return at.Truncate(time.Second).Add(time.Second) }
	// workerHolding starts a worker whose copy holds rec (the one before
	// shut down), and returns how to read the payload its next run got
	var w *Worker
	workerHolding := func(rec schedstore.Record) (ranWith func(scheduler.Tick) string, logs *worktest.Logs) {
		t.Helper()
		if w != nil {
			sctx, cancel := context.WithTimeout(ctx, worktest.Wait)
			defer cancel()
			if err := w.Shutdown(sctx); err != nil {
				t.Fatal(err)
			}
		}
		exec := newFakeExec(nil)
		logs = &worktest.Logs{}
		w = e.worker(t, holding(rec), exec, WithReplica("w"), WithHandlers(registry(t, "report")), WithLogger(logs.Logger()))
		return func(tick scheduler.Tick) string {
			t.Helper()
			s := worktest.Recv(t, exec.started, "the run of "+tick.ID())
			if !s.run.Tick.Equal(tick.At) {
				t.Fatalf("ran %s, want %s", s.run.Tick, tick.At)
			}
			e.State(t, runtimeQueue, tick, asynq.TaskStateCompleted)
			return string(s.run.Payload)
		}, logs
	}
	archived := func(tick scheduler.Tick, why string) {
		t.Helper()
		info := e.State(t, runtimeQueue, tick, asynq.TaskStateArchived)
		if !strings.Contains(info.LastErr, why) {
			t.Errorf("%s archived: last error %q, want %q", tick.ID(), info.LastErr, why)
		}
		var rec jobs.RunRecord
		poll.Require(t, worktest.Wait, "the record of "+tick.ID(), func() bool {
			recs, err := history.Read(ctx, e.RDB, "baton", "@report/x", 0)
			i := slices.IndexFunc(recs, func(r jobs.RunRecord) bool { return r.Tick.Equal(tick.At) })
			if err != nil || i < 0 {
				return false
			}
			rec = recs[i]
			return true
		})
		if rec.Status != jobs.StatusRefused || !strings.Contains(rec.Reason, why) {
			t.Errorf("%s: record %+v", tick.ID(), rec)
		}
	}

	v1 := put(1)
	ranWith, logs := workerHolding(v1)
	// runs dispatches tick for the definition dispatcher holds and wants
	// the current worker's run of it to get payload want
	runs := func(dispatcher *config.Config, tick scheduler.Tick, want, what string) {
		t.Helper()
		e.dispatch(t, dispatcher, tick)
		if got := ranWith(tick); got != want {
			t.Errorf("%s ran with %s, want %s", what, got, want)
		}
	}
	early, early2 := tickAt(dueAfter(v1.Created)), tickAt(dueAfter(v1.Created).Add(time.Second))
	redisAfter(early2.At)
	v2 := put(2)
	if v2.Version != 2 || !v2.Created.Equal(v1.Created) {
		t.Fatalf("replace: %+v", v2)
	}
	behind := tickAt(dueAfter(v2.Updated))
	runs(holding(v2), behind, `{"n":2}`, "the tick dispatched for version 2, on a copy behind the replace,")
	if logs.Count("which this replica's copy does not hold yet") != 1 {
		t.Errorf("the run with the stored definition not logged:\n%s", logs.String())
	}
	runs(holding(v1), early, `{"n":1}`, "a tick dispatched for version 1, on a worker that holds it,")

	ranWith, _ = workerHolding(v2)
	runs(holding(v1), early2, `{"n":2}`, "a tick due before the replacement, which has it too, dispatched for version 1,")
	late := tickAt(behind.At.Add(time.Second))
	runs(holding(v1), late, `{"n":2}`, "a tick due after the replacement, dispatched for version 1,")
	// replaced again, by a definition without the tick: a task dispatched
	// for version 1 has no definition left to run with
	v3, err := st.Put(ctx, "report/x", []byte(`{"schedule":"0 0 1 1 *","concurrency":"allow","handler":{"name":"report","payload":{"n":30}}}`), schedstore.Any)
	if err != nil || v3.Version != 3 {
		t.Fatalf("replace: %+v, %v", v3, err)
	}
	none := tickAt(late.At.Add(time.Second))
	e.dispatch(t, holding(v1), none)
	archived(none, "was replaced by 3-")

	// deleted and put again: a new schedule, created later
	if _, err := st.Delete(ctx, "report/x"); err != nil {
		t.Fatal(err)
	}
	redisAfter(none.At)
	n3 := put(3)
	if n3.Version != 1 || !n3.Created.After(v2.Created) {
		t.Fatalf("put again: %+v", n3)
	}
	again := tickAt(dueAfter(n3.Created))
	runs(holding(n3), again, `{"n":3}`, "the new schedule's tick, on a copy that holds the deleted one,")
	workerHolding(n3)
	gone := tickAt(again.At.Add(time.Second))
	e.dispatch(t, holding(v2), gone)
	archived(gone, "deleted since it was dispatched")
}

// A task whose payload is of a format version newer than this replica
// reads (a newer replica dispatched it) is not misread: it goes back to
// the queue without spending an attempt, for a replica that reads it, and
// the replica says so once; once the expiry it names has passed, it is
// archived with a record.
func TestATaskOfANewerFormatIsHandedBackNotMisread(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	exec := newFakeExec(nil)
	logs := &worktest.Logs{}
	e.worker(t, cfg, exec, WithReplica("old"), WithLogger(logs.Logger()))
	job, _ := cfg.Job("report")
	enqueueNewer := func(tick scheduler.Tick, exp time.Time) {
		t.Helper()
		task, err := handoff.NewRunTaskAt(cfg, job, tick, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(task.Payload(), &p); err != nil {
			t.Fatal(err)
		}
		p["v"], p["exp"], p["fence"] = formats.TaskPayload+1, exp.UnixMilli(), "a member that means something else now"
		if exp.IsZero() {
			delete(p, "exp")
		}
		b, _ := json.Marshal(p)
		if _, err := e.Client.Enqueue(asynq.NewTask(handoff.TaskType, b), asynq.TaskID(tick.ID()), asynq.Queue("baton:default"), asynq.MaxRetry(1)); err != nil {
			t.Fatal(err)
		}
	}
	fresh := worktest.TickOf("report", 1)
	enqueueNewer(fresh, time.Now().Add(time.Hour))
	poll.Require(t, worktest.Wait, "the task handed back", func() bool {
		info, err := e.Insp.GetTaskInfo("baton:default", fresh.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "newer than this replica reads")
	})
	if info, _ := e.Insp.GetTaskInfo("baton:default", fresh.ID()); info.Retried != 0 {
		t.Errorf("a hand-back spent an attempt: retried %d", info.Retried)
	}
	if n := logs.Count("a task's payload is of a format newer than this replica reads"); n != 1 {
		t.Errorf("said %d times, want once:\n%s", n, logs.String())
	}

	expired := worktest.TickOf("report", 2)
	enqueueNewer(expired, time.Now().Add(-time.Second))
	info := e.State(t, "baton:default", expired, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "before it expired") {
		t.Errorf("expired: retried %d, last error %q", info.Retried, info.LastErr)
	}
	recs := historyOf(t, e, "report", 1, nil)
	if recs[0].Status != jobs.StatusRefused || !strings.Contains(recs[0].Reason, fmt.Sprintf("format version %d", formats.TaskPayload+1)) {
		t.Errorf("record %+v", recs[0])
	}
	// one that names no expiry is bounded by its tick: handed back while
	// the tick is young, archived once it is a day old
	young := worktest.TickOf("report", 3)
	enqueueNewer(young, time.Time{})
	poll.Require(t, worktest.Wait, "the task without an expiry handed back", func() bool {
		info, err := e.Insp.GetTaskInfo("baton:default", young.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "newer than this replica reads")
	})
	old := scheduler.Tick{Job: "report", At: time.Now().Add(-25 * time.Hour).Truncate(time.Minute).UTC(), RunID: "run-old", Fence: 1, Replica: "sched-1"}
	enqueueNewer(old, time.Time{})
	if info := e.State(t, "baton:default", old, asynq.TaskStateArchived); !strings.Contains(info.LastErr, "it names no expiry") {
		t.Errorf("a day-old task without an expiry: last error %q", info.LastErr)
	}
	worktest.None(t, exec.started, 10*time.Millisecond, "a run")
}

// A trigger of a runtime schedule whose definition was replaced between
// the trigger's read and its run (a trigger that read the definition a
// moment before a replace landed, or whose task waited in the queue across
// it) runs with the replacement: a trigger is on no schedule's course, so
// every definition has it.
func TestATriggeredTickOfAReplacedScheduleRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := e.Config(t, "  []")
	st := schedstore.Of(e.RDB, base)
	put, holding := reportSchedule(t, st, base, "@every 1h")
	v1 := put(1)
	before := scheduler.Tick{Job: "@report/x", At: v1.Updated, RunID: "trigger-before", Replica: "api", Manual: true}
	poll.Require(t, worktest.Wait, "the store's clock past the first put", func() bool {
		now, err := e.RDB.Time(ctx).Result()
		return err == nil && now.After(v1.Updated.Add(time.Millisecond))
	})
	v2 := put(2)
	if v2.Version != 2 || !v2.Updated.After(before.At) {
		t.Fatalf("replace: %+v", v2)
	}
	exec := newFakeExec(nil)
	e.worker(t, holding(v2), exec, WithReplica("w"), WithHandlers(registry(t, "report")))

	after := scheduler.Tick{Job: "@report/x", At: v2.Updated, RunID: "trigger-after", Replica: "api", Manual: true}
	e.dispatch(t, holding(v1), after)
	s := worktest.Recv(t, exec.started, "the triggered run")
	if s.run.RunID != after.RunID || string(s.run.Payload) != `{"n":2}` {
		t.Errorf("ran %s with %s, want %s with the replacement's payload {\"n\":2}", s.run.RunID, s.run.Payload, after.RunID)
	}
	e.State(t, runtimeQueue, after, asynq.TaskStateCompleted)

	e.dispatch(t, holding(v1), before)
	s = worktest.Recv(t, exec.started, "the run of the trigger taken before the replacement")
	if s.run.RunID != before.RunID || string(s.run.Payload) != `{"n":2}` {
		t.Errorf("ran %s with %s, want %s with the replacement's payload {\"n\":2}", s.run.RunID, s.run.Payload, before.RunID)
	}
	e.State(t, runtimeQueue, before, asynq.TaskStateCompleted)
}

// A task that names a definition of its runtime schedule newer than the
// store holds (the queue Redis went back) is handed back, spending no
// attempt, for as long as the task may run (a replica puts the schedules
// back meanwhile); once its signed expiry passed it is archived with a
// record, not handed back for ever.
func TestATaskOfAScheduleTheStoreLostIsArchivedOnceItExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := e.Config(t, "  []")
	rec, err := schedstore.Of(e.RDB, base).Put(ctx, "report/x", []byte(`{"schedule":"@every 1m","concurrency":"allow","handler":{"name":"report"}}`), schedstore.Any)
	if err != nil {
		t.Fatal(err)
	}
	held, err := rec.Job(base)
	if err != nil {
		t.Fatal(err)
	}
	cfg := base.WithSource(scheduleSource{held.Name: held})
	// the dispatcher read version 3, which the store lost
	lost := *held
	lost.Ref.Version = 3
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec, WithReplica("w"), WithHandlers(registry(t, "report")))
	enqueue := func(tick scheduler.Tick, exp time.Time) {
		t.Helper()
		task, err := handoff.NewRunTask(cfg, &lost, tick)
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(task.Payload(), &p); err != nil {
			t.Fatal(err)
		}
		p["exp"] = exp.UnixMilli()
		b, _ := json.Marshal(p)
		if _, err := e.Client.Enqueue(asynq.NewTask(handoff.TaskType, b), asynq.TaskID(tick.ID()), asynq.Queue(runtimeQueue), asynq.MaxRetry(1)); err != nil {
			t.Fatal(err)
		}
	}
	tickAt := func(n int) scheduler.Tick {
		at := time.Now().UTC().Truncate(time.Minute).Add(-time.Duration(n) * time.Minute)
		return scheduler.Tick{Job: held.Name, At: at, RunID: fmt.Sprintf("run-%d", n), Fence: 1, Replica: "sched-1"}
	}

	live := tickAt(1)
	enqueue(live, time.Now().Add(time.Hour))
	poll.Require(t, worktest.Wait, "the task handed back", func() bool {
		info, err := e.Insp.GetTaskInfo(runtimeQueue, live.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "the store holds")
	})

	expired := tickAt(2)
	enqueue(expired, time.Now().Add(-time.Second))
	info := e.State(t, runtimeQueue, expired, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "expired") {
		t.Errorf("expired: retried %d, last error %q", info.Retried, info.LastErr)
	}
	var got jobs.RunRecord
	poll.Require(t, worktest.Wait, "the record of "+expired.ID(), func() bool {
		recs, err := history.Read(ctx, e.RDB, "baton", held.Name, 0)
		i := slices.IndexFunc(recs, func(r jobs.RunRecord) bool { return r.Tick.Equal(expired.At) })
		if err != nil || i < 0 {
			return false
		}
		got = recs[i]
		return true
	})
	if got.Status != jobs.StatusRefused || !strings.Contains(got.Reason, "expired") {
		t.Errorf("record %+v", got)
	}
	worktest.None(t, exec.started, 10*time.Millisecond, "a run")
}

// A task dispatched for a definition the store no longer holds (version
// 1; the worker holds version 3), where a writer of the queue Redis put
// back a copy of version 2 (older than the replicas' mark of the
// schedule), is not run with that copy: it is handed back, as for a store
// gone back, until the schedule is put again or the task expires; without
// the mark, the copy (a replacement of version 1 that has the tick) would
// run it.
func TestATaskIsNotRunWithAnOlderCopyPutBackIntoTheStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := e.signedConfig(t, []string{"0123456789abcdef0123456789abcdef-test-key"}, false, "  []")
	masters := []redis.UniversalClient{redistest.New(t).TestClient(t)}
	keep := schedstore.NewMasterMarks(masters, base.Namespace)
	st := schedstore.Of(e.RDB, base).WithMarks(keep)
	put, holding := reportSchedule(t, st, base, "@every 1s")
	v1 := put(1)
	v2 := put(2)
	defs := schedstore.Keys(base.Namespace, 1)[0]
	copy2, err := e.RDB.HGet(ctx, defs, "report/x").Result()
	if err != nil {
		t.Fatal(err)
	}
	v3 := put(3)
	// the replicas saw version 3
	if err := keep.Raise(ctx, map[string]schedstore.Mark{"report/x": {Created: v3.Created.UnixMilli(), Version: v3.Version}}); err != nil {
		t.Fatal(err)
	}
	if err := e.RDB.HSet(ctx, defs, "report/x", copy2).Err(); err != nil { // the writer puts version 2 back
		t.Fatal(err)
	}
	exec := newFakeExec(nil)
	logs := &worktest.Logs{}
	e.worker(t, holding(v3), exec, WithReplica("w"), WithHandlers(registry(t, "report")), WithLogger(logs.Logger()), WithLockMasters(masters))
	tick := scheduler.Tick{Job: "@report/x", At: v2.Created.Truncate(time.Second).Add(2 * time.Second), RunID: "run-old", Fence: 1, Replica: "sched-1"}
	e.dispatch(t, holding(v1), tick) // dispatched for version 1, as a lagging dispatcher would
	poll.Require(t, worktest.Wait, "the task handed back", func() bool {
		info, err := e.Insp.GetTaskInfo(runtimeQueue, tick.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "put back into the queue Redis")
	})
	worktest.None(t, exec.started, 100*time.Millisecond, "a run with the copy put back")
	if logs.Count("the store holds an older copy of this task's runtime schedule") != 1 {
		t.Errorf("logs:\n%s", logs.String())
	}
}

// A worker whose copy is behind a replace of a runtime schedule that names
// a calendar put at runtime (the copy holds version 1, the task names
// version 2) runs the tick with version 2 read from the store, decoded
// with the runtime calendar it names, as it does for a schedule naming no
// calendar (TestATriggeredTickOfAReplacedScheduleRuns).
func TestATickOfAReplacedScheduleNamingARuntimeCalendarRunsWithTheReplacement(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	base := e.Config(t, "  []")
	st := schedstore.Of(e.RDB, base)
	spec, stored, err := config.DecodeCalendar("holidays", []byte(`{dates: [2020-01-01]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, schedstore.CalendarID("holidays"), stored, schedstore.Any); err != nil {
		t.Fatal(err)
	}
	withCal := base.WithCalendars(map[string]*config.CalendarSpec{"holidays": spec})
	put := func(n int) schedstore.Record {
		t.Helper()
		rec, err := st.Put(ctx, "report/x", []byte(fmt.Sprintf(`{"schedule":"@every 1h","exclude":["holidays"],"concurrency":"allow","handler":{"name":"report","payload":{"n":%d}}}`, n)), schedstore.Any)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	holding := func(rec schedstore.Record) *config.Config {
		t.Helper()
		j, err := rec.Job(withCal) // as the replica's Follower decodes it
		if err != nil {
			t.Fatal(err)
		}
		return base.WithSource(scheduleSource{j.Name: j})
	}
	v1 := put(1)
	poll.Require(t, worktest.Wait, "the store's clock past the first put", func() bool {
		now, err := e.RDB.Time(ctx).Result()
		return err == nil && now.After(v1.Updated.Add(time.Millisecond))
	})
	v2 := put(2)
	exec := newFakeExec(nil)
	logs := &worktest.Logs{}
	e.worker(t, holding(v1), exec, WithReplica("w"), WithHandlers(registry(t, "report")), WithLogger(logs.Logger()))
	tick := scheduler.Tick{Job: "@report/x", At: v2.Updated, RunID: "trigger-v2", Replica: "api", Manual: true}
	e.dispatch(t, holding(v2), tick)
	select {
	case s := <-exec.started:
		if string(s.run.Payload) != `{"n":2}` {
			t.Errorf("ran with %s, want the replacement's payload {\"n\":2}", s.run.Payload)
		}
	case <-time.After(worktest.Wait):
		info, _ := e.Insp.GetTaskInfo(runtimeQueue, tick.ID())
		var state, lastErr string
		if info != nil {
			state, lastErr = info.State.String(), info.LastErr
		}
		t.Fatalf("the tick did not run: task %s, last error %q\n%s", state, lastErr, logs.String())
	}
}

// A task of a runtime schedule naming a runtime calendar whose stored
// record cannot be read (the worker's copy refuses both) waits for it, handed back (the calendar may be put
// again) with one warning, never run; once the task expires it is archived
// as refused, naming the calendar.
func TestATaskWhoseRuntimeCalendarCannotBeReadWaitsThenIsArchived(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	base := e.Config(t, "  []")
	st := schedstore.Of(e.RDB, base)
	spec, stored, err := config.DecodeCalendar("holidays", []byte(`{dates: [2020-01-01]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, schedstore.CalendarID("holidays"), stored, schedstore.Any); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Put(ctx, "report/x", []byte(`{"schedule":"@every 1h","exclude":["holidays"],"concurrency":"allow","handler":{"name":"report"}}`), schedstore.Any)
	if err != nil {
		t.Fatal(err)
	}
	j, err := rec.Job(base.WithCalendars(map[string]*config.CalendarSpec{"holidays": spec}))
	if err != nil {
		t.Fatal(err)
	}
	holding := base.WithSource(scheduleSource{j.Name: j})
	defs := schedstore.Keys(base.Namespace, 1)[0]
	if err := e.RDB.HSet(ctx, defs, schedstore.CalendarID("holidays"), "{not a record").Err(); err != nil {
		t.Fatal(err)
	}
	exec := newFakeExec(nil)
	logs := &worktest.Logs{}
	clk := clock.NewFake(time.Now())
	// the worker's copy refuses the schedule with its calendar, so holds
	// none: the task's definition is read from the store
	e.worker(t, base, exec, WithReplica("w"), WithHandlers(registry(t, "report")), WithLogger(logs.Logger()), WithClock(clk))
	tick := scheduler.Tick{Job: "@report/x", At: time.Now().UTC().Truncate(time.Second), RunID: "trigger", Replica: "api", Manual: true}
	e.dispatch(t, holding, tick)
	poll.Require(t, worktest.Wait, "the task handed back, naming the calendar", func() bool {
		info, err := e.Insp.GetTaskInfo(runtimeQueue, tick.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, `runtime calendar "holidays"`)
	})
	if n := logs.Count("a calendar this task's runtime schedule names cannot be used"); n != 1 {
		t.Errorf("%d warnings, want one:\n%s", n, logs.String())
	}
	clk.Advance(48 * time.Hour)
	info := e.State(t, runtimeQueue, tick, asynq.TaskStateArchived)
	if !strings.Contains(info.LastErr, `a calendar its runtime schedule names cannot be used`) {
		t.Errorf("archived with %q", info.LastErr)
	}
	worktest.None(t, exec.started, 100*time.Millisecond, "a run without its calendar")
}
