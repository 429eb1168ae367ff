package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/scheduler"
)

const (
	keyA = "key-A-0123456789abcdef0123456789abcdef"
	keyB = "key-B-0123456789abcdef0123456789abcdef"
)

// signedConfig loads a config on e's Redis with signing keys and jobs.
func (e *env) signedConfig(t *testing.T, keys []string, acceptUnsigned bool, jobs string) *config.Config {
	t.Helper()
	k, _ := json.Marshal(keys)
	y := fmt.Sprintf("redis: {url: %q}\nworker: {shutdown_grace: 2s}\nsecurity: {signing_keys: %s, accept_unsigned: %v}\njobs:\n%s",
		"redis://"+e.srv.Addr()+"/0", k, acceptUnsigned, jobs)
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return cfg
}

// enqueueRaw writes a task into Redis as anyone with write access could.
func (e *env) enqueueRaw(t *testing.T, id string, payload []byte) {
	t.Helper()
	_, err := e.client.Enqueue(asynq.NewTask(taskTypeRun, payload), asynq.TaskID(id), asynq.Queue("baton:default"), asynq.MaxRetry(3))
	if err != nil {
		t.Fatal(err)
	}
}

// unsignedPayload is a tick's payload as a dispatcher in namespace baton writes
// it, unsigned.
func unsignedPayload(t scheduler.Tick) []byte {
	p := payloadOf(t)
	p.Namespace, p.Queue = "baton", "baton:default"
	b, _ := json.Marshal(p)
	return b
}

// With signing keys, a worker runs only what its keys signed: a writer to
// Redis cannot enqueue a run (unsigned, signed with another key, a signed
// payload under another task ID, a malformed run id), and a payload's fence never reaches the run, not even a
// signed one's. A legitimate dispatch runs; a signed tick from the future
// waits; one the job's schedule does not have runs (a rolling deploy).
func TestWorkerRunsOnlySignedTasks(t *testing.T) {
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
	logs := &logBuf{}
	w := e.worker(t, cfg, exec, WithLogger(logs.logger()))
	own := newSigner(cfg.Security)
	other := newSigner(config.SecurityConfig{SigningKeys: []string{keyB}})

	future := scheduler.Tick{Job: "job", At: time.Now().Add(time.Hour).Truncate(time.Minute), RunID: "r-future", Replica: "x"}
	offSchedule := tickOf("job", 7)
	offSchedule.At = offSchedule.At.Add(13 * time.Second)
	for _, tc := range []struct {
		name, id string
		payload  []byte
		reason   string
	}{
		{"unsigned", tickOf("job", 1).ID(), unsignedPayload(tickOf("job", 1)), "unsigned"},
		{"another key", tickOf("job", 2).ID(), other.sign(domainTask, unsignedPayload(tickOf("job", 2))), "bad signature"},
		{"tampered", tickOf("job", 3).ID(), []byte(strings.Replace(string(own.sign(domainTask, unsignedPayload(tickOf("job", 3)))), `"job":"job"`, `"job":"lone"`, 1)), "bad signature"},
		{"signed payload under another task ID", tickOf("job", 4).ID(), own.sign(domainTask, unsignedPayload(tickOf("job", 5))), "is not its tick's"},
		{"bad run id", tickOf("job", 6).ID(), own.sign(domainTask, []byte(strings.Replace(string(unsignedPayload(tickOf("job", 6))), "run-job-6", "a b\\u001b", 1))), "run id"},
	} {
		e.enqueueRaw(t, tc.id, tc.payload)
		info := e.stateByID(t, tc.id, asynq.TaskStateArchived)
		if info.Retried != 0 || !strings.Contains(info.LastErr, tc.reason) || !strings.Contains(info.LastErr, "refused") {
			t.Errorf("%s: archived after %d retries with %q; want refused, %q", tc.name, info.Retried, info.LastErr, tc.reason)
		}
	}
	none(t, exec.started, 100*time.Millisecond, "a run of a refused task")
	if n := logs.count("refusing a task"); n != 1 {
		t.Errorf("%d refusal lines, want one for the kind", n)
	}
	// a signed tick from the future waits (handed back, no attempt spent)
	// instead of being lost: this worker's clock may be the one behind
	e.enqueueRaw(t, future.ID(), own.sign(domainTask, unsignedPayload(future)))
	if info := e.stateByID(t, future.ID(), asynq.TaskStateRetry); info.Retried != 0 || !strings.Contains(info.LastErr, "not due yet") {
		t.Errorf("future tick: retried %d, last error %q", info.Retried, info.LastErr)
	}
	// a signed tick the job's current schedule does not have runs: a replica
	// with the schedule before a rolling deploy changed it dispatched it
	e.enqueueRaw(t, offSchedule.ID(), own.sign(domainTask, unsignedPayload(offSchedule)))
	if s := recv(t, exec.started, "the off-schedule run"); !s.run.Tick.Equal(offSchedule.At) {
		t.Errorf("ran %v", s.run.Tick)
	}

	// the same forgery again: archived, not logged again
	t8 := tickOf("job", 8)
	e.enqueueRaw(t, t8.ID(), unsignedPayload(t8))
	e.stateByID(t, t8.ID(), asynq.TaskStateArchived)
	if n := logs.count("refusing a task"); n != 1 {
		t.Errorf("%d refusal lines after a repeat, want 1", n)
	}

	// a signed task with a poisoned fence runs with a fence of the masters
	t9 := tickOf("job", 9)
	t9.Fence = math.MaxInt64
	e.enqueueRaw(t, t9.ID(), own.sign(domainTask, unsignedPayload(t9)))
	s := recv(t, exec.started, "the signed run")
	if s.run.Fence == math.MaxInt64 || s.run.Fence <= 0 {
		t.Errorf("run fence %d: want one from the lock masters", s.run.Fence)
	}
	// and a dispatch through the dispatcher runs
	e.dispatch(t, cfg, tickOf("lone", 10))
	if s := recv(t, exec.started, "the dispatched run"); s.run.Job != "lone" || s.run.Fence == tickOf("lone", 10).Fence {
		t.Errorf("dispatched run %+v: want lone with a lease fence", s.run)
	}
	// a run is counted once Execute has returned, after its start was seen
	var st Stats
	if !poll.Until(wait, func() bool { st = w.Stats(); return st.Ran == 3 && st.Failed == 6 }) {
		t.Errorf("stats %+v, want 3 ran, 6 refused", st)
	}
}

// Rotation: a worker verifies with both of its keys and signs with the
// first. Replicas on [A], then [A, B], then [B, A], then [B]: each step's
// tasks run on the next step's workers. accept_unsigned lets a worker with
// keys run unsigned tasks while signing is being introduced.
func TestSigningKeyRotation(t *testing.T) {
	e := newEnv(t)
	jobs := "  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n"
	steps := [][]string{{keyA}, {keyA, keyB}, {keyB, keyA}, {keyB}}
	minute := 1
	for i := 1; i < len(steps); i++ {
		from, to := e.signedConfig(t, steps[i-1], false, jobs), e.signedConfig(t, steps[i], false, jobs)
		exec := newFakeExec(nil)
		w := e.worker(t, to, exec)
		tk := tickOf("job", minute)
		minute++
		e.dispatch(t, from, tk)
		if s := recv(t, exec.started, fmt.Sprintf("a task signed by %v on a worker with %v", steps[i-1], steps[i])); !s.run.Tick.Equal(tk.At) {
			t.Errorf("ran %v", s.run.Tick)
		}
		e.state(t, "baton:default", tk, asynq.TaskStateCompleted)
		shutdown(t, w)
	}
	// skipping a step: [A] signs, [B] refuses
	exec := newFakeExec(nil)
	w := e.worker(t, e.signedConfig(t, []string{keyB}, false, jobs), exec)
	tk := tickOf("job", 30)
	e.dispatch(t, e.signedConfig(t, []string{keyA}, false, jobs), tk)
	if info := e.state(t, "baton:default", tk, asynq.TaskStateArchived); !strings.Contains(info.LastErr, "bad signature") {
		t.Errorf("last error %q", info.LastErr)
	}
	shutdown(t, w)

	// introducing keys: an unsigned dispatch runs on a worker that accepts it
	exec = newFakeExec(nil)
	e.worker(t, e.signedConfig(t, []string{keyA}, true, jobs), exec)
	tk = tickOf("job", 31)
	e.dispatch(t, e.config(t, jobs), tk)
	recv(t, exec.started, "an unsigned task on a worker with accept_unsigned")
}

// A replace request must be signed too: a forged one on the cancel channel
// stops nothing; the signed one a newer run sends stops the older run.
func TestForgedReplaceRequestStopsNothing(t *testing.T) {
	e := newEnv(t)
	cfg := e.signedConfig(t, []string{keyA}, false, `  - name: sync
    schedule: "@every 1m"
    concurrency: replace
    handler: {name: sync}
`)
	cfg.Worker.Concurrency = 1
	exec1 := newFakeExec(blockUntil(nil))
	logs := &logBuf{}
	e.worker(t, cfg, exec1, WithReplica("w1"), WithLogger(logs.logger()))
	t1 := tickOf("sync", 1)
	e.dispatch(t, cfg, t1)
	recv(t, exec1.started, "the old run")
	ch := "baton:cancel:sync"
	newer, _ := json.Marshal(cancelRequest{ID: tickOf("sync", 59).ID(), Tick: tickOf("sync", 59).At.Format(time.RFC3339), Replica: "evil"})
	for _, forged := range [][]byte{newer, newSigner(config.SecurityConfig{SigningKeys: []string{keyB}}).sign(domainCancel+"\x00"+ch, newer),
		newSigner(cfg.Security).sign(domainCancel+"\x00baton:cancel:other", newer)} { // signed for another job's channel
		if err := e.rdb.Publish(context.Background(), ch, forged).Err(); err != nil {
			t.Fatal(err)
		}
	}
	poll.Require(t, wait, "two refusals logged (unsigned, bad signature)", func() bool { return logs.count("ignoring a replace request") == 2 })
	none(t, exec1.ended, 200*time.Millisecond, "the old run stopped by a forged request")

	// the real thing: a newer tick's run on another worker replaces it
	exec2 := newFakeExec(nil)
	e.worker(t, cfg, exec2, WithReplica("w2"))
	e.dispatch(t, cfg, tickOf("sync", 2))
	end := recv(t, exec1.ended, "the old run's end")
	if end.cause == nil || !strings.Contains(end.cause.Error(), "replaced") {
		t.Errorf("old run ended by %v", end.cause)
	}
}

// stateByID waits until the task with id in queue baton:default is in state
// want.
func (e *env) stateByID(t *testing.T, id string, want asynq.TaskState) *asynq.TaskInfo {
	t.Helper()
	return e.waitState(t, "baton:default", id, want)
}

// shutdown stops w now (cleanup would do it too, later).
func shutdown(t *testing.T, w *Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// The signature member is found only at the very end of the object, and
// anything but the exact bytes signed fails.
func TestSignatureFraming(t *testing.T) {
	g := newSigner(config.SecurityConfig{SigningKeys: []string{keyA}})
	for _, body := range []string{`{}`, `{"a":1}`, `{"note":"\"sig\":\"x\"}"}`} {
		msg := g.sign(domainTask, []byte(body))
		got, err := g.verify(domainTask, msg)
		if err != nil || string(got) != body {
			t.Errorf("%s: verify(%s) = %s, %v", body, msg, got, err)
		}
		if _, err := g.verify(domainCancel, msg); err != ErrBadSignature {
			t.Errorf("%s: verified as another kind of message: %v", body, err)
		}
		for _, bad := range []string{
			strings.Replace(string(msg), "{", "{ ", 1),                                           // a byte changed
			string(msg[:len(msg)-1]) + ` }`,                                                      // trailing space
			strings.Replace(string(msg), `,"sig"`, `,"sig" `, 1),                                 // not the framing sign writes
			string(msg[:len(msg)-3]) + `A"}`,                                                     // a signature byte changed
			`{"x":1,` + string(msg[1:]),                                                          // a member added in front
			strings.TrimSuffix(string(msg), `"}`) + `","sig":"` + strings.Repeat("A", 43) + `"}`, // a second sig
		} {
			if bad == string(msg) {
				continue // the change does not apply to this body
			}
			if _, err := g.verify(domainTask, []byte(bad)); err == nil {
				t.Errorf("%s: accepted %s", body, bad)
			}
		}
	}
	unsigned := []byte(`{"a":1}`)
	if _, err := g.verify(domainTask, unsigned); err != ErrUnsigned {
		t.Errorf("unsigned: %v", err)
	}
	lax := newSigner(config.SecurityConfig{SigningKeys: []string{keyA}, AcceptUnsigned: true})
	if _, err := lax.verify(domainTask, unsigned); err != nil {
		t.Errorf("accept_unsigned: %v", err)
	}
	// a well-formed signature must be right even where unsigned is accepted
	forged := `{"a":1,"sig":"` + strings.Repeat("A", 43) + `"}`
	if _, err := lax.verify(domainTask, []byte(forged)); err != ErrBadSignature {
		t.Errorf("accept_unsigned with a forged sig: %v", err)
	}
}
