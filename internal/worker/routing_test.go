package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
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
		info, err := e.Insp.GetTaskInfo("baton:default", first.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "handed back")
	})
	info, _ := e.Insp.GetTaskInfo("baton:default", first.ID())
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
		e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
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
	e := newEnv(t)
	base := e.Config(t, "  []")
	cfg := withSchedule(t, base, "report/x", `{schedule: "@every 1m", handler: {name: report}}`)
	logs := &worktest.Logs{}
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec, WithReplica("a"), WithHandlers(registry(t, "other")), WithLogger(logs.Logger()))
	tick := scheduleTick("@report/x", 1)
	e.dispatch(t, cfg, tick)
	info := e.State(t, "baton:default", tick, asynq.TaskStateArchived)
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
	info = e.State(t, "baton:default", gone, asynq.TaskStateArchived)
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
		info, err := e.Insp.GetTaskInfo("baton:default", first.ID())
		return err == nil && info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "handed back")
	})
	if info, _ := e.Insp.GetTaskInfo("baton:default", first.ID()); info.Retried != 0 || !strings.Contains(info.LastErr, "http_prefixes") {
		t.Errorf("handed back: retried %d, last error %q", info.Retried, info.LastErr)
	}

	// b leaves: no live replica allows the URL
	if err := b.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := scheduleTick("@hook/1", 2)
	e.dispatch(t, cfgB, second)
	info := e.State(t, "baton:default", second, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "no live replica runs it") {
		t.Errorf("retried %d, last error %q", info.Retried, info.LastErr)
	}
	recs := historyOf(t, e, "@hook/1", 2, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusRefused })
	if !strings.Contains(recs[0].Reason, "http_prefixes") {
		t.Errorf("history record %+v", recs[0])
	}
	worktest.None(t, exec.started, 10*time.Millisecond, "a run on the replica that refuses the URL")
}
