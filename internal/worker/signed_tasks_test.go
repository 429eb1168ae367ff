package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/scheduler"
)

const (
	keyA = "key-A-0123456789abcdef0123456789abcdef"
	keyB = "key-B-0123456789abcdef0123456789abcdef"
)

// With signing keys, a worker runs only what its keys signed: a writer to
// Redis cannot enqueue a run (unsigned, signed with another key, a signed
// payload under another task ID, a malformed run id), and a payload's fence never reaches the run, not even a
// signed one's. A legitimate dispatch runs; a signed tick from the future
// waits; one the job's schedule does not have runs (a rolling deploy).
func TestWorkerRunsOnlySignedTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.signedConfig(t, []string{keyA}, false, `  - name: job
    schedule: "@every 1m"
    concurrency: allow
    handler: {name: job}
  - name: lone
    schedule: "@every 1m"
    handler: {name: lone}
`)
	exec := newFakeExec(nil)
	logs := &worktest.Logs{}
	w := e.worker(t, cfg, exec, WithLogger(logs.Logger()))
	own := handoff.NewSigner(cfg.Security)
	other := handoff.NewSigner(config.SecurityConfig{SigningKeys: []string{keyB}})

	future := scheduler.Tick{Job: "job", At: time.Now().Add(time.Hour).Truncate(time.Minute), RunID: "r-future", Replica: "x"}
	offSchedule := worktest.TickOf("job", 7)
	offSchedule.At = offSchedule.At.Add(13 * time.Second)
	for _, tc := range []struct {
		name, id string
		payload  []byte
		reason   string
	}{
		{"unsigned", worktest.TickOf("job", 1).ID(), unsignedPayload(worktest.TickOf("job", 1)), "unsigned"},
		{"another key", worktest.TickOf("job", 2).ID(), other.Sign(handoff.DomainTask, unsignedPayload(worktest.TickOf("job", 2))), "bad signature"},
		{"tampered", worktest.TickOf("job", 3).ID(), []byte(strings.Replace(string(own.Sign(handoff.DomainTask, unsignedPayload(worktest.TickOf("job", 3)))), `"job":"job"`, `"job":"lone"`, 1)), "bad signature"},
		{"signed payload under another task ID", worktest.TickOf("job", 4).ID(), own.Sign(handoff.DomainTask, unsignedPayload(worktest.TickOf("job", 5))), "is not its tick's"},
		{"bad run id", worktest.TickOf("job", 6).ID(), own.Sign(handoff.DomainTask, []byte(strings.Replace(string(unsignedPayload(worktest.TickOf("job", 6))), "run-job-6", "a b\\u001b", 1))), "run id"},
	} {
		e.enqueueRaw(t, tc.id, tc.payload)
		info := e.stateByID(t, tc.id, asynq.TaskStateArchived)
		if info.Retried != 0 || !strings.Contains(info.LastErr, tc.reason) || !strings.Contains(info.LastErr, "refused") {
			t.Errorf("%s: archived after %d retries with %q; want refused, %q", tc.name, info.Retried, info.LastErr, tc.reason)
		}
	}
	worktest.None(t, exec.started, 100*time.Millisecond, "a run of a refused task")
	if n := logs.Count("refusing a task"); n != 1 {
		t.Errorf("%d refusal lines, want one for the kind", n)
	}
	// a signed tick from the future waits (handed back, no attempt spent)
	// instead of being lost: this worker's clock may be the one behind
	e.enqueueRaw(t, future.ID(), own.Sign(handoff.DomainTask, unsignedPayload(future)))
	if info := e.stateByID(t, future.ID(), asynq.TaskStateRetry); info.Retried != 0 || !strings.Contains(info.LastErr, "not due yet") {
		t.Errorf("future tick: retried %d, last error %q", info.Retried, info.LastErr)
	}
	// a signed tick the job's current schedule does not have runs: a replica
	// with the schedule before a rolling deploy changed it dispatched it
	e.enqueueRaw(t, offSchedule.ID(), own.Sign(handoff.DomainTask, unsignedPayload(offSchedule)))
	if s := worktest.Recv(t, exec.started, "the off-schedule run"); !s.run.Tick.Equal(offSchedule.At) {
		t.Errorf("ran %v", s.run.Tick)
	}

	// the same forgery again: archived, not logged again
	t8 := worktest.TickOf("job", 8)
	e.enqueueRaw(t, t8.ID(), unsignedPayload(t8))
	e.stateByID(t, t8.ID(), asynq.TaskStateArchived)
	if n := logs.Count("refusing a task"); n != 1 {
		t.Errorf("%d refusal lines after a repeat, want 1", n)
	}

	// a signed task with a poisoned fence runs with a fence of the masters
	t9 := worktest.TickOf("job", 9)
	t9.Fence = math.MaxInt64
	e.enqueueRaw(t, t9.ID(), own.Sign(handoff.DomainTask, unsignedPayload(t9)))
	s := worktest.Recv(t, exec.started, "the signed run")
	if s.run.Fence == math.MaxInt64 || s.run.Fence <= 0 {
		t.Errorf("run fence %d: want one from the lock masters", s.run.Fence)
	}
	// and a dispatch through the dispatcher runs
	e.dispatch(t, cfg, worktest.TickOf("lone", 10))
	if s := worktest.Recv(t, exec.started, "the dispatched run"); s.run.Job != "lone" || s.run.Fence == worktest.TickOf("lone", 10).Fence {
		t.Errorf("dispatched run %+v: want lone with a lease fence", s.run)
	}
	// a run is counted once Execute has returned, after its start was seen
	var st Stats
	if !poll.Until(worktest.Wait, func() bool { st = w.Stats(); return st.Ran == 3 && st.Failed == 6 }) {
		t.Errorf("stats %+v, want 3 ran, 6 refused", st)
	}
}

// Rotation: a worker verifies with both of its keys and signs with the
// first. Replicas on [A], then [A, B], then [B, A], then [B]: each step's
// tasks run on the next step's workers. accept_unsigned lets a worker with
// keys run unsigned tasks while signing is being introduced.
func TestSigningKeyRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jobs := "  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n"
	steps := [][]string{{keyA}, {keyA, keyB}, {keyB, keyA}, {keyB}}
	minute := 1
	for i := 1; i < len(steps); i++ {
		from, to := e.signedConfig(t, steps[i-1], false, jobs), e.signedConfig(t, steps[i], false, jobs)
		exec := newFakeExec(nil)
		w := e.worker(t, to, exec)
		tk := worktest.TickOf("job", minute)
		minute++
		e.dispatch(t, from, tk)
		if s := worktest.Recv(t, exec.started, fmt.Sprintf("a task signed by %v on a worker with %v", steps[i-1], steps[i])); !s.run.Tick.Equal(tk.At) {
			t.Errorf("ran %v", s.run.Tick)
		}
		e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
		shutdown(t, w)
	}
	// skipping a step: [A] signs, [B] refuses
	exec := newFakeExec(nil)
	w := e.worker(t, e.signedConfig(t, []string{keyB}, false, jobs), exec)
	tk := worktest.TickOf("job", 30)
	e.dispatch(t, e.signedConfig(t, []string{keyA}, false, jobs), tk)
	if info := e.State(t, "baton:default", tk, asynq.TaskStateArchived); !strings.Contains(info.LastErr, "bad signature") {
		t.Errorf("last error %q", info.LastErr)
	}
	shutdown(t, w)

	// introducing keys: an unsigned dispatch runs on a worker that accepts it
	exec = newFakeExec(nil)
	e.worker(t, e.signedConfig(t, []string{keyA}, true, jobs), exec)
	tk = worktest.TickOf("job", 31)
	e.dispatch(t, e.Config(t, jobs), tk)
	worktest.Recv(t, exec.started, "an unsigned task on a worker with accept_unsigned")
}

// A replace request must be signed too: a forged one on the cancel channel
// stops nothing; the signed one a newer run sends stops the older run.
func TestForgedReplaceRequestStopsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.signedConfig(t, []string{keyA}, false, `  - name: sync
    schedule: "@every 1m"
    concurrency: replace
    handler: {name: sync}
`)
	cfg.Worker.Concurrency = 1
	exec1 := newFakeExec(blockUntil(nil))
	logs := &worktest.Logs{}
	e.worker(t, cfg, exec1, WithReplica("w1"), WithLogger(logs.Logger()))
	t1 := worktest.TickOf("sync", 1)
	e.dispatch(t, cfg, t1)
	worktest.Recv(t, exec1.started, "the old run")
	ch := "baton:cancel:sync"
	newer, _ := json.Marshal(cancelRequest{ID: worktest.TickOf("sync", 59).ID(), Tick: worktest.TickOf("sync", 59).At.Format(time.RFC3339), Replica: "evil"})
	for _, forged := range [][]byte{newer, handoff.NewSigner(config.SecurityConfig{SigningKeys: []string{keyB}}).Sign(handoff.DomainCancel+"\x00"+ch, newer),
		handoff.NewSigner(cfg.Security).Sign(handoff.DomainCancel+"\x00baton:cancel:other", newer)} { // signed for another job's channel
		if err := e.RDB.Publish(context.Background(), ch, forged).Err(); err != nil {
			t.Fatal(err)
		}
	}
	poll.Require(t, worktest.Wait, "two refusals logged (unsigned, bad signature)", func() bool { return logs.Count("ignoring a replace request") == 2 })
	worktest.None(t, exec1.ended, 200*time.Millisecond, "the old run stopped by a forged request")

	// the real thing: a newer tick's run on another worker replaces it
	exec2 := newFakeExec(nil)
	e.worker(t, cfg, exec2, WithReplica("w2"))
	e.dispatch(t, cfg, worktest.TickOf("sync", 2))
	end := worktest.Recv(t, exec1.ended, "the old run's end")
	if end.cause == nil || !strings.Contains(end.cause.Error(), "replaced") {
		t.Errorf("old run ended by %v", end.cause)
	}
}

// signedConfig loads a config on e's Redis with signing keys and jobs.
func (e *env) signedConfig(t *testing.T, keys []string, acceptUnsigned bool, jobs string) *config.Config {
	t.Helper()
	k, _ := json.Marshal(keys)
	y := fmt.Sprintf("redis: {url: %q}\nworker: {shutdown_grace: 2s}\nsecurity: {signing_keys: %s, accept_unsigned: %v}\njobs:\n%s",
		"redis://"+e.Srv.Addr()+"/0", k, acceptUnsigned, jobs)
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return cfg
}

// enqueueRaw writes a task into Redis as anyone with write access could.
func (e *env) enqueueRaw(t *testing.T, id string, payload []byte) {
	t.Helper()
	_, err := e.Client.Enqueue(asynq.NewTask(handoff.TaskType, payload), asynq.TaskID(id), asynq.Queue("baton:default"), asynq.MaxRetry(3))
	if err != nil {
		t.Fatal(err)
	}
}

// unsignedPayload is a tick's payload as a dispatcher in namespace baton writes
// it, unsigned.
func unsignedPayload(t scheduler.Tick) []byte {
	p := handoff.PayloadOf(t)
	p.Namespace, p.Queue = "baton", "baton:default"
	b, _ := json.Marshal(p)
	return b
}

// stateByID waits until the task with id in queue baton:default is in state
// want.
func (e *env) stateByID(t *testing.T, id string, want asynq.TaskState) *asynq.TaskInfo {
	t.Helper()
	return e.WaitState(t, "baton:default", id, want)
}

// shutdown stops w now (cleanup would do it too, later).
func shutdown(t *testing.T, w *Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// asynq dedupes task IDs per queue: a copy of a signed, completed task in
// another queue of the deployment is refused (the payload's queue is
// signed), so the tick does not run twice.
func TestSignedTaskCopiedToAnotherQueueIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k := `["` + keyA + `"]`
	y := "redis: {url: \"redis://" + e.Srv.Addr() + "/0\"}\nworker: {shutdown_grace: 2s, queues: {default: 1, other: 1}}\nsecurity: {signing_keys: " + k + "}\njobs:\n" +
		"  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n"
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	tk := worktest.TickOf("job", 1)
	e.dispatch(t, cfg, tk)
	worktest.Recv(t, exec.started, "the run")
	info := e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	// the replay: the same signed bytes, the same task ID, another queue
	if _, err := e.Client.Enqueue(asynq.NewTask(handoff.TaskType, info.Payload), asynq.TaskID(tk.ID()), asynq.Queue("baton:other")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-exec.started:
		t.Fatalf("tick %s ran twice: the replayed copy in baton:other ran (run id %s)", tk.ID(), s.run.RunID)
	case <-time.After(2 * time.Second):
	}
}

// While signing is introduced (accept_unsigned), an unsigned payload that
// holds the bytes "sig" (a job or replica named sig) is unsigned, not
// forged: it runs.
func TestAcceptUnsignedRunsJobNamedSig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jobs := "  - name: sig\n    schedule: \"@every 1m\"\n    handler: {name: sig}\n  - name: other\n    schedule: \"@every 1m\"\n    handler: {name: other}\n"
	switching := e.signedConfig(t, []string{keyA}, true, jobs)
	old := e.Config(t, jobs) // a replica not yet given the key
	exec := newFakeExec(nil)
	e.worker(t, switching, exec)
	a := worktest.TickOf("sig", 1)
	b := worktest.TickOf("other", 2)
	b.Replica = "sig" // baton run --id sig
	for _, tk := range []scheduler.Tick{a, b} {
		e.dispatch(t, old, tk)
		select {
		case <-exec.started:
		case <-time.After(5 * time.Second):
			info, _ := e.Insp.GetTaskInfo("baton:default", tk.ID())
			t.Errorf("unsigned task %s (replica %s) from a replica without keys not run under accept_unsigned; task: %s %q", tk.ID(), tk.Replica, info.State, info.LastErr)
		}
	}
}

// Forged tasks choose their job, tick and namespace: refusals are logged
// once per kind, not per forged value, and not again as task failures.
func TestForgedTasksDoNotFloodTheLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.signedConfig(t, []string{keyA}, false, "  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n")
	logs := &worktest.Logs{}
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec, WithLogger(logs.Logger()))
	const n = 40
	for i := range n {
		tk := worktest.TickOf("job", 0)
		tk.At = tk.At.Add(time.Duration(i) * time.Minute)
		tk.Job = "forged-" + strconv.Itoa(i) // any name
		e.enqueueRaw(t, tk.ID(), unsignedPayload(tk))
	}
	poll.Require(t, worktest.Wait, strconv.Itoa(n)+" forged tasks archived", func() bool {
		q, err := e.Insp.GetQueueInfo("baton:default")
		return err == nil && q.Archived == n
	})
	time.Sleep(200 * time.Millisecond) // real time: asynq calls its error handler (a "task failed" line) around the archive, not before it
	lines := logs.Count("refusing") + logs.Count("task failed")
	if lines > 4 {
		t.Errorf("%d forged tasks wrote %d error lines (refusing: %d, task failed: %d); want a bounded number", n, lines, logs.Count("refusing"), logs.Count("task failed"))
	}
	worktest.None(t, exec.started, 10*time.Millisecond, "a forged run")
}

// With signing keys, an unsigned payload that claims a newer format is
// refused like any unsigned one (archived, no attempt spent on it): the
// format is read only from what a key signed, so a writer to Redis cannot
// have a task handed back for ever.
func TestAnUnsignedTaskOfANewerFormatIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.signedConfig(t, []string{keyA}, false, `  - name: job
    schedule: "@every 1m"
    handler: {name: job}
`)
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	tick := worktest.TickOf("job", 1)
	var p map[string]any
	if err := json.Unmarshal(unsignedPayload(tick), &p); err != nil {
		t.Fatal(err)
	}
	p["v"], p["exp"] = 99, 0
	b, _ := json.Marshal(p)
	e.enqueueRaw(t, tick.ID(), b)
	info := e.stateByID(t, tick.ID(), asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "unsigned") || !strings.Contains(info.LastErr, "refused") {
		t.Errorf("archived after %d retries with %q; want refused as unsigned", info.Retried, info.LastErr)
	}
	worktest.None(t, exec.started, 10*time.Millisecond, "a run")
}
