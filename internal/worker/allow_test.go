package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
)

// allowJob is a concurrency-allow Go handler job.
const allowJob = `  - name: report
    schedule: "@every 1m"
    concurrency: allow
    max_retry: 0
    handler: {name: report}
`

// A copy of an allow job's task put back into the queue while its tick
// still runs (a queue-Redis writer pushes its ID onto the pending list
// again) does not run the tick a second time: the copy finds the tick held
// by the running attempt and is handed back, and once that attempt ended
// the copy is refused as done. The tick runs once.
func TestACopyOfAnAllowTaskPutBackWhileItsTickRunsDoesNotRunItAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, allowJob)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	logs := &worktest.Logs{}
	e.worker(t, cfg, exec, WithReplica("w"), WithHandlers(registry(t, "report")), WithLogger(logs.Logger()))
	tick := worktest.TickOf("report", 1)
	e.dispatch(t, cfg, tick)
	worktest.Recv(t, exec.started, "the run")

	// the attacker: the task's ID on the pending list again, as asynq
	// would put back an orphaned task
	ctx := context.Background()
	if err := e.RDB.LPush(ctx, "asynq:{baton:default}:pending", tick.ID()).Err(); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, worktest.Wait, "the copy handed back", func() bool {
		return logs.Count("another attempt of this tick runs") > 0
	})
	worktest.None(t, exec.started, 200*time.Millisecond, "a second run while the first runs")
	close(gate)
	worktest.Recv(t, exec.ended, "the run's end")
	poll.Require(t, worktest.Wait, "the copy refused as done", func() bool {
		return w0Refused(e, t)
	})
	worktest.None(t, exec.started, 200*time.Millisecond, "a second run")
}

// w0Refused reports whether the tick's task was refused as done: asynq's
// task hash says so in its last error (the copy and the task share it).
func w0Refused(e *env, t *testing.T) bool {
	info, err := e.Insp.GetTaskInfo("baton:default", worktest.TickOf("report", 1).ID())
	return err == nil && strings.Contains(info.LastErr, "ended already")
}

// A hold its attempt no longer keeps (its worker died) does not keep the
// tick from running: asynq's requeue of a crashed worker's task runs once
// the hold expired, and the tick runs once.
func TestATickHeldByADeadAttemptRunsOnceItsHoldExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, allowJob)
	exec := newFakeExec(nil)
	logs := &worktest.Logs{}
	e.worker(t, cfg, exec, WithReplica("w"), WithHandlers(registry(t, "report")), WithLogger(logs.Logger()))
	tick := worktest.TickOf("report", 2)
	// the dead attempt's hold, as its worker left it, with little time left
	ctx := context.Background()
	if err := e.RDB.Set(ctx, tickRecordKey("baton", tick), runningMarker+":dead", 1500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	e.dispatch(t, cfg, tick)
	s := worktest.Recv(t, exec.started, "the run after the dead attempt's hold expired")
	if !s.run.Tick.Equal(tick.At) {
		t.Fatalf("ran %s", s.run.Tick)
	}
	if logs.Count("another attempt of this tick runs") == 0 {
		t.Errorf("the task ran without waiting for the hold:\n%s", logs.String())
	}
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	recs := historyOf(t, e, "report", 1, nil)
	if recs[0].Status != jobs.StatusOK {
		t.Errorf("record %+v", recs[0])
	}
	worktest.None(t, exec.started, 100*time.Millisecond, "a second run")
}
