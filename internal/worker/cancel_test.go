package worker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
)

// A stop request for a deleted runtime schedule (RequestStop, "deleted")
// reaches every worker by the pattern they follow: the schedule's run under
// way on another replica ends with ErrScheduleDeleted, recorded as stopped
// because its schedule was deleted, and is not retried. A run of another
// schedule goes on. A tick of the deleted schedule fetched later, while this
// replica still holds the schedule (it follows the delete a moment later),
// does not start.
func TestStopRequestStopsTheRunsOfADeletedSchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := withSchedules(t, e.Config(t, "  []"), map[string]string{
		"report/x": `{schedule: "@every 1m", max_retry: 3, handler: {name: report}}`,
		"report/y": `{schedule: "@every 1m", handler: {name: report}}`,
	})
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec, WithReplica("b"), WithHandlers(registry(t, "report")))
	x, y := scheduleTick("@report/x", 1), scheduleTick("@report/y", 1)
	e.dispatch(t, cfg, x)
	e.dispatch(t, cfg, y)
	worktest.Recv(t, exec.started, "a run")
	worktest.Recv(t, exec.started, "a run")

	if err := RequestStop(context.Background(), e.RDB, cfg, "@report/x", "deleted", "another replica"); err != nil {
		t.Fatal(err)
	}
	end := worktest.Recv(t, exec.ended, "the stopped run's end")
	if end.run.Job != "@report/x" || !errors.Is(end.cause, ErrScheduleDeleted) {
		t.Fatalf("ended %s with cause %v", end.run.Job, end.cause)
	}
	info := e.State(t, runtimeQueue, x, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "its runtime schedule was deleted") {
		t.Errorf("stopped task: retried %d, last error %q", info.Retried, info.LastErr)
	}
	recs := historyOf(t, e, "@report/x", 1, func(r []jobs.RunRecord) bool { return !r[0].Ended.IsZero() })
	if recs[0].Status != jobs.StatusStopped || recs[0].Reason != "stopped: its runtime schedule was deleted" || recs[0].Worker != "b" {
		t.Errorf("history record %+v", recs[0])
	}
	if st := w.Stats(); st.Stopped != 1 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
	later := scheduleTick("@report/x", 2)
	e.dispatch(t, cfg, later)
	info = e.State(t, runtimeQueue, later, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "its runtime schedule was deleted") {
		t.Errorf("later tick: retried %d, last error %q", info.Retried, info.LastErr)
	}
	recs = historyOf(t, e, "@report/x", 2, nil)
	if recs[0].Status != jobs.StatusRefused || recs[0].Reason != "its runtime schedule was deleted" {
		t.Errorf("later tick's history record %+v", recs[0])
	}
	close(gate)
	e.State(t, runtimeQueue, y, asynq.TaskStateCompleted)
}

// A runtime schedule may have concurrency replace: a newer tick's run
// stops the older one, on another replica, as for a job of the list.
func TestRuntimeScheduleWithConcurrencyReplaceReplacesItsOlderRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := withSchedule(t, e.Config(t, "  []"), "sync/x", `{schedule: "@every 1m", concurrency: replace, handler: {name: sync}}`)
	cfg.Worker.Concurrency = 1 // one run per worker: the newer tick goes to the other one
	exec1, exec2 := newFakeExec(blockUntil(nil)), newFakeExec(nil)
	w1 := e.worker(t, cfg, exec1, WithReplica("w1"), WithHandlers(registry(t, "sync")))
	t1, t2 := scheduleTick("@sync/x", 1), scheduleTick("@sync/x", 2)
	e.dispatch(t, cfg, t1)
	worktest.Recv(t, exec1.started, "old run on w1")
	e.worker(t, cfg, exec2, WithReplica("w2"), WithHandlers(registry(t, "sync")))
	e.dispatch(t, cfg, t2)

	end := worktest.Recv(t, exec1.ended, "old run's end")
	if !errors.Is(end.cause, ErrReplaced) || !end.run.Tick.Equal(t1.At) {
		t.Errorf("old run ended with %v (cause %v)", end.err, end.cause)
	}
	s := worktest.Recv(t, exec2.started, "new run on w2")
	if !s.run.Tick.Equal(t2.At) || s.run.Replica != "w2" {
		t.Errorf("new run %+v", s.run)
	}
	info := e.State(t, runtimeQueue, t1, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "replaced") {
		t.Errorf("replaced task: retried %d, last error %q", info.Retried, info.LastErr)
	}
	e.State(t, runtimeQueue, t2, asynq.TaskStateCompleted)
	if st := w1.Stats(); st.Replaced != 1 || st.Failed != 0 {
		t.Errorf("w1 stats %+v", st)
	}
}

// A stop request published again long after it was made (a replay by one
// who can publish on the queue Redis, or a copy held up) does not stop the
// runs of a schedule put again since; a fresh one does.
func TestStaleStopRequestDoesNotStopRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := withSchedule(t, e.Config(t, "  []"), "report/x", `{schedule: "@every 1m", handler: {name: report}}`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	e.worker(t, cfg, exec, WithReplica("b"), WithHandlers(registry(t, "report")))
	x := scheduleTick("@report/x", 1)
	e.dispatch(t, cfg, x)
	worktest.Recv(t, exec.started, "a run")
	if err := requestStopAt(context.Background(), e.RDB, cfg, "@report/x", "deleted", "another replica", time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	worktest.None(t, exec.ended, 300*time.Millisecond, "a run stopped by an hour-old request")
	if err := RequestStop(context.Background(), e.RDB, cfg, "@report/x", "deleted", "another replica"); err != nil {
		t.Fatal(err)
	}
	if end := worktest.Recv(t, exec.ended, "the stopped run's end"); !errors.Is(end.cause, ErrScheduleDeleted) {
		t.Fatalf("ended with cause %v", end.cause)
	}
	close(gate)
}

// A run of a deleted runtime schedule that was still waiting for the job
// (concurrency buffer_one: another run holds it) when the stop request came
// is stopped too: recorded as stopped, archived, not retried, and asynq's
// "Retry exhausted" line that follows is the one handleError expected (no
// task ended on purpose stays remembered).
func TestStopRequestStopsARunWaitingForTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := withSchedules(t, e.Config(t, "  []"), map[string]string{
		"report/x": `{schedule: "@every 1m", max_retry: 3, retry_backoff: 10ms, concurrency: buffer_one, handler: {name: report}}`,
	})
	exec := newFakeExec(blockUntil(nil))
	w := e.worker(t, cfg, exec, WithReplica("b"), WithHandlers(registry(t, "report")))
	first, waiting := scheduleTick("@report/x", 1), scheduleTick("@report/x", 2)
	e.dispatch(t, cfg, first)
	worktest.Recv(t, exec.started, "the first tick's run")
	e.dispatch(t, cfg, waiting)
	e.State(t, runtimeQueue, waiting, asynq.TaskStateActive)
	time.Sleep(200 * time.Millisecond) // the waiting tick is kept, waiting for the lease

	if err := RequestStop(context.Background(), e.RDB, cfg, "@report/x", "deleted", "another replica"); err != nil {
		t.Fatal(err)
	}
	info := e.State(t, runtimeQueue, waiting, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "its runtime schedule was deleted") {
		t.Errorf("the waiting tick's task: retried %d, last error %q", info.Retried, info.LastErr)
	}
	var recs []jobs.RunRecord
	if !poll.Until(worktest.Wait, func() bool {
		recs, _ = history.Read(context.Background(), e.RDB, "baton", "@report/x", 0)
		return len(recs) > 0 && recs[0].Tick.Equal(waiting.At) && !recs[0].Ended.IsZero()
	}) || recs[0].Status != jobs.StatusStopped || !strings.Contains(recs[0].Reason, "its runtime schedule was deleted") {
		t.Errorf("the waiting tick's records %+v", recs)
	}
	poll.Require(t, worktest.Wait, "no task remembered as ended on purpose", func() bool {
		n := 0
		w.meantEnds.Range(func(any, any) bool { n++; return true })
		return n == 0
	})
}
