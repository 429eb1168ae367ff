package worker

// Event schedules against namespaces, signing and masking: forged and
// replayed tasks, cancels, rolling deploys, skewed clocks, secrets.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// asynq's cancel channel (asynq:cancel) is shared by every deployment and
// needs no key: a PUBLISH of a task ID there stops no baton run (the
// worker's asynq server listens on NS:asynq-cancel instead).
func TestAsynqCancelChannelStopsNoRun(t *testing.T) {
	e := newEnv(t)
	cfg := e.signedConfig(t, []string{keyA}, false, `  - name: long
    schedule: "@every 1m"
    max_retry: 0
    handler: {name: long}
`)
	exec := newFakeExec(blockUntil(nil))
	e.worker(t, cfg, exec)
	tk := worktest.TickOf("long", 1)
	e.dispatch(t, cfg, tk)
	worktest.Recv(t, exec.started, "the signed run")
	// the forger: one PUBLISH, no key
	if err := e.RDB.Publish(context.Background(), "asynq:cancel", tk.ID()).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case end := <-exec.ended:
		info, _ := e.Insp.GetTaskInfo("baton:default", tk.ID())
		state := "?"
		if info != nil {
			state = info.State.String() + " " + info.LastErr
		}
		t.Fatalf("a PUBLISH asynq:cancel %s by a writer without the key stopped the run (cause %v); task now %s", tk.ID(), end.cause, state)
	case <-time.After(time.Second):
	}
}

// A rolling deploy changes a job's schedule (@every 1m -> @every 2m): a tick
// the old schedule had, dispatched by a replica that still has it, runs on
// a worker with the new one.
func TestTickOfAChangedScheduleRuns(t *testing.T) {
	e := newEnv(t)
	old := e.Config(t, "  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n")
	cur := e.Config(t, "  - name: job\n    schedule: \"@every 2m\"\n    handler: {name: job}\n")
	tk := worktest.TickOf("job", 1) // 00:01: a tick of @every 1m, not of @every 2m
	e.dispatch(t, old, tk)          // the old replica's dispatch (tick recorded done)
	exec := newFakeExec(nil)
	e.worker(t, cur, exec) // the new replica's worker fetches it
	select {
	case <-exec.started:
	case <-time.After(5 * time.Second):
		info, _ := e.Insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("a tick dispatched under the old schedule never ran; task: %s %q", info.State, info.LastErr)
	}
}

// The same for a job moved from UTC to Europe/Berlin.
func TestTickOfAChangedTimezoneRuns(t *testing.T) {
	e := newEnv(t)
	old := e.Config(t, "  - name: job\n    schedule: \"0 3 * * *\"\n    handler: {name: job}\n")
	cur := e.Config(t, "  - name: job\n    schedule: \"0 3 * * *\"\n    timezone: Europe/Berlin\n    handler: {name: job}\n")
	tk := scheduler.Tick{Job: "job", At: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), RunID: "run-tz", Replica: "old"}
	e.dispatch(t, old, tk)
	exec := newFakeExec(nil)
	e.worker(t, cur, exec)
	select {
	case <-exec.started:
	case <-time.After(5 * time.Second):
		info, _ := e.Insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("a tick dispatched under the old time zone never ran; task: %s %q", info.State, info.LastErr)
	}
}

// A worker whose clock is behind Redis sees on-time ticks in the future: they
// wait (handed back) instead of being archived.
func TestWorkerClockBehindLosesNoTick(t *testing.T) {
	e := newEnv(t)
	cfg := e.Config(t, "  - name: job\n    schedule: \"@every 1s\"\n    handler: {name: job}\n")
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	at := time.Now().Truncate(time.Second).Add(4 * time.Second)
	tk := scheduler.Tick{Job: "job", At: at.UTC(), RunID: "run-skew", Replica: "sched"}
	e.dispatch(t, cfg, tk)
	select {
	case <-exec.started:
	case <-time.After(8 * time.Second):
		info, _ := e.Insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("an on-time tick seen by a worker 4s behind never ran; task: %s %q", info.State, info.LastErr)
	}
}

// asynq dedupes task IDs per queue: a copy of a signed, completed task in
// another queue of the deployment is refused (the payload's queue is
// signed), so the tick does not run twice.
func TestSignedTaskCopiedToAnotherQueueIsRefused(t *testing.T) {
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

// Two deployments on one Redis run the same job@tick: a cancel through
// asynq's inspector (a shared channel, keyed by task ID alone) stops
// neither run and fails neither task.
func TestAsynqCancelCrossesNoNamespace(t *testing.T) {
	e := newEnv(t)
	load := func(ns string) *config.Config {
		y := "redis: {url: \"redis://" + e.Srv.Addr() + "/0\"}\nnamespace: " + ns + "\nworker: {shutdown_grace: 2s}\njobs:\n  - name: long\n    schedule: \"@every 1m\"\n    max_retry: 0\n    handler: {name: long}\n"
		cfg, err := config.Load([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	prod, staging := load("prod"), load("staging")
	execProd, execStaging := newFakeExec(blockUntil(nil)), newFakeExec(blockUntil(nil))
	for _, w := range []struct {
		cfg  *config.Config
		exec *fakeExec
	}{{prod, execProd}, {staging, execStaging}} {
		// each deployment's lock client has its namespace's prefix, as baton run's
		locks, err := locking.New(e.RDB, locking.WithFreshDeployment(), locking.WithPrefix(w.cfg.Namespace+":lock:"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { locks.Close() })
		wk := New(w.cfg, e.Opt, locks, w.exec, WithPollIntervals(10*time.Millisecond, 20*time.Millisecond), WithReplica(w.cfg.Namespace+"-1"))
		if err := wk.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
			defer cancel()
			_ = wk.Shutdown(ctx)
		})
	}
	tk := worktest.TickOf("long", 1)
	e.dispatch(t, prod, tk)
	e.dispatch(t, staging, tk)
	worktest.Recv(t, execProd.started, "prod's run")
	worktest.Recv(t, execStaging.started, "staging's run")
	// an operator cancels "the" task through asynq's inspector: the channel
	// is shared by both deployments and keyed by task ID alone, so baton's
	// workers do not listen to it; neither run stops, neither task fails
	if err := e.Insp.CancelProcessing(tk.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case end := <-execStaging.ended:
		t.Fatalf("an asynq cancel of %s stopped staging's run (cause %v)", tk.ID(), end.cause)
	case end := <-execProd.ended:
		t.Fatalf("an asynq cancel of %s stopped prod's run (cause %v)", tk.ID(), end.cause)
	case <-time.After(time.Second):
	}
	for _, q := range []string{"prod:default", "staging:default"} {
		if info, err := e.Insp.GetTaskInfo(q, tk.ID()); err != nil || info.State != asynq.TaskStateActive {
			t.Errorf("%s task after the cancel: %+v, %v; want still active", q, info, err)
		}
	}
}

// Forged tasks choose their job, tick and namespace: refusals are logged
// once per kind, not per forged value, and not again as task failures.
func TestForgedTasksDoNotFloodTheLog(t *testing.T) {
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

// An output tail masks the job's secrets longest first (a secret that starts
// with another is masked whole) and before it cuts the output (a secret the
// cut would split is masked whole).
func TestOutputTailMasksLongestFirstBeforeTheCut(t *testing.T) {
	job := &config.Job{Name: "j", Exec: &config.ExecSpec{Command: []string{"x"}, Env: map[string]string{
		"USER_ID": "tok1", "TOKEN": "tok1-very-secret-part", "A": "aaaa", "B": "bbbb", "C": "cccc"}}}
	for range 50 {
		if tail := outputTail([]byte("token is tok1-very-secret-part\n"), job); strings.Contains(tail, "very-secret-part") {
			t.Errorf("env masking order: tail %q", tail)
			break
		}
	}
	secret := "S3cr3t-0123456789-abcdefghijklmnopqrstuv"
	job2 := &config.Job{Name: "j", Exec: &config.ExecSpec{Command: []string{"x"}, Env: map[string]string{"TOKEN": secret}}}
	out := "the token: " + secret + strings.Repeat("-", 2048-len(secret)+1) + "\n"
	if tail := outputTail([]byte(out), job2); strings.Contains(tail, secret[1:]) {
		t.Errorf("the 2 KiB cut fell inside the secret: the tail starts %q", tail[:50])
	}
}
