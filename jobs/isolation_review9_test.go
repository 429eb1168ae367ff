package jobs

// Review 9: event schedules against the isolation-and-secrets change.
// A test that fails demonstrates a bug.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// A Redis writer without the signing key stops a running signed run: asynq's
// own cancel channel (asynq:cancel, which the documented ACL grants) cancels
// the handler's context of the task whose ID (job@tick, predictable) is
// published. With max_retry 0 the tick is lost; with retries it runs again
// after a partial run. The README says a writer without the key cannot make
// baton stop anything.
func TestAsynqCancelChannelStopsASignedRun_review9(t *testing.T) {
	e := newEnv(t)
	cfg := e.signedConfig(t, []string{keyA}, false, `  - name: long
    schedule: "@every 1m"
    max_retry: 0
    handler: {name: long}
`)
	exec := newFakeExec(blockUntil(nil))
	e.worker(t, cfg, exec)
	tk := tickOf("long", 1)
	e.dispatch(t, cfg, tk)
	recv(t, exec.started, "the signed run")
	// the forger: one PUBLISH, no key
	if err := e.rdb.Publish(context.Background(), "asynq:cancel", tk.ID()).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case end := <-exec.ended:
		info, _ := e.insp.GetTaskInfo("baton:default", tk.ID())
		state := "?"
		if info != nil {
			state = info.State.String() + " " + info.LastErr
		}
		t.Fatalf("a PUBLISH asynq:cancel %s by a writer without the key stopped the run (cause %v); task now %s", tk.ID(), end.cause, state)
	case <-time.After(time.Second):
	}
}

// Rolling deploy that changes a job's schedule (@every 1m -> @every 2m): a
// tick the old replica claimed, recorded done and dispatched is archived by
// a new replica's worker as "not a tick of schedule" - a lost run that is
// not recorded missed. The same happens to a task pending or waiting for a
// retry when a single replica restarts with the new schedule. No keys are
// needed: validTick runs for every deployment.
func TestScheduleChangeArchivesDispatchedTick_review9(t *testing.T) {
	e := newEnv(t)
	old := e.config(t, "  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n")
	cur := e.config(t, "  - name: job\n    schedule: \"@every 2m\"\n    handler: {name: job}\n")
	tk := tickOf("job", 1) // 00:01: a tick of @every 1m, not of @every 2m
	e.dispatch(t, old, tk) // the old replica's dispatch (tick recorded done)
	exec := newFakeExec(nil)
	e.worker(t, cur, exec) // the new replica's worker fetches it
	select {
	case <-exec.started:
	case <-time.After(5 * time.Second):
		info, _ := e.insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("a tick dispatched under the old schedule never ran; task: %s %q", info.State, info.LastErr)
	}
}

// Same with a time zone change of a job (UTC -> Europe/Berlin, "0 3 * * *"):
// the old replica's tick at 03:00 UTC is refused by the new worker.
func TestTimezoneChangeArchivesDispatchedTick_review9(t *testing.T) {
	e := newEnv(t)
	old := e.config(t, "  - name: job\n    schedule: \"0 3 * * *\"\n    handler: {name: job}\n")
	cur := e.config(t, "  - name: job\n    schedule: \"0 3 * * *\"\n    timezone: Europe/Berlin\n    handler: {name: job}\n")
	tk := scheduler.Tick{Job: "job", At: time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC), RunID: "run-tz", Replica: "old"}
	e.dispatch(t, old, tk)
	exec := newFakeExec(nil)
	e.worker(t, cur, exec)
	select {
	case <-exec.started:
	case <-time.After(5 * time.Second):
		info, _ := e.insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("a tick dispatched under the old time zone never ran; task: %s %q", info.State, info.LastErr)
	}
}

// A worker-only replica ("baton worker") whose clock is 4 s behind Redis:
// nothing checks a worker's clock (only schedulers compare with Redis TIME),
// and validTick archives every on-time tick as "in the future" (bound 2 x
// max_clock_skew + 1s = 2s by default) instead of running it or putting it
// back until it is due. Simulated by a tick due 4 s after the worker's now.
func TestWorkerClockBehindArchivesTicks_review9(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, "  - name: job\n    schedule: \"@every 1s\"\n    handler: {name: job}\n")
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	at := time.Now().Truncate(time.Second).Add(4 * time.Second)
	tk := scheduler.Tick{Job: "job", At: at.UTC(), RunID: "run-skew", Replica: "sched"}
	e.dispatch(t, cfg, tk)
	select {
	case <-exec.started:
	case <-time.After(8 * time.Second):
		info, _ := e.insp.GetTaskInfo("baton:default", tk.ID())
		t.Fatalf("an on-time tick seen by a worker 4s behind never ran; task: %s %q", info.State, info.LastErr)
	}
}

// A signed task copied by a Redis writer into another queue of the same
// namespace, under the same task ID, while its completed copy is retained:
// asynq dedupes task IDs per queue only, the signature does not cover the
// queue, and validTask checks only the ID, so the tick runs a second time.
// The README says asynq's retention makes a second enqueue a no-op and that
// re-addressed tasks are refused.
func TestSignedTaskReplayedIntoAnotherQueueRunsTwice_review9(t *testing.T) {
	e := newEnv(t)
	k := `["` + keyA + `"]`
	y := "redis: {url: \"redis://" + e.srv.Addr() + "/0\"}\nworker: {shutdown_grace: 2s, queues: {default: 1, other: 1}}\nsecurity: {signing_keys: " + k + "}\njobs:\n" +
		"  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n"
	cfg, err := Load([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	tk := tickOf("job", 1)
	e.dispatch(t, cfg, tk)
	recv(t, exec.started, "the run")
	info := e.state(t, "baton:default", tk, asynq.TaskStateCompleted)
	// the replay: the same signed bytes, the same task ID, another queue
	if _, err := e.client.Enqueue(asynq.NewTask(TaskTypeRun, info.Payload), asynq.TaskID(tk.ID()), asynq.Queue("baton:other")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-exec.started:
		t.Fatalf("tick %s ran twice: the replayed copy in baton:other ran (run id %s)", tk.ID(), s.run.RunID)
	case <-time.After(2 * time.Second):
	}
}

// validate --print masks every value from ${VAR}, README says; a handler
// payload value from the environment that YAML reads as a number (a PIN,
// an account number, a numeric API key) is printed as it is.
func TestNumericSecretInPayloadPrinted_review9(t *testing.T) {
	t.Setenv("BATON_R9_PIN", "424242")
	cfg, err := Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: job\n    schedule: \"@every 1m\"\n    handler:\n      name: job\n      payload:\n        pin: ${BATON_R9_PIN}\n"))
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.Redacted()
	if strings.Contains(out, "424242") {
		t.Errorf("the printed config shows a value from ${BATON_R9_PIN}:\n%s", out)
	}
}

// Introducing signing (accept_unsigned: true): replicas without keys still
// dispatch unsigned tasks, which a worker with keys must run. verify treats
// any unsigned message that contains the bytes "sig" (with quotes) as a
// forged signature - and a job named sig, or a replica whose --id is sig,
// puts exactly that in every payload: each of those ticks is archived as
// "bad signature" during the switch-over.
func TestAcceptUnsignedRefusesJobNamedSig_review9(t *testing.T) {
	e := newEnv(t)
	jobs := "  - name: sig\n    schedule: \"@every 1m\"\n    handler: {name: sig}\n  - name: other\n    schedule: \"@every 1m\"\n    handler: {name: other}\n"
	switching := e.signedConfig(t, []string{keyA}, true, jobs)
	old := e.config(t, jobs) // a replica not yet given the key
	exec := newFakeExec(nil)
	e.worker(t, switching, exec)
	a := tickOf("sig", 1)
	b := tickOf("other", 2)
	b.Replica = "sig" // baton run --id sig
	for _, tk := range []scheduler.Tick{a, b} {
		e.dispatch(t, old, tk)
		select {
		case <-exec.started:
		case <-time.After(5 * time.Second):
			info, _ := e.insp.GetTaskInfo("baton:default", tk.ID())
			t.Errorf("unsigned task %s (replica %s) from a replica without keys not run under accept_unsigned; task: %s %q", tk.ID(), tk.Replica, info.State, info.LastErr)
		}
	}
}

// Two deployments share one Redis (namespaces prod and staging, the same
// job names, as TestTwoNamespacesOnOneRedis has them). An operator of prod
// cancels prod's running task with asynq's inspector (or a prod-only ACL
// user publishes on asynq:cancel, which the documented ACL grants to every
// namespace): asynq's cancel channel is shared and keyed by the task ID
// alone (job@tick, the same in both), so staging's run of that tick is
// stopped too. The README says another namespace cannot touch its tasks.
func TestCancelInOneNamespaceStopsTheOther_review9(t *testing.T) {
	e := newEnv(t)
	load := func(ns string) *Config {
		y := "redis: {url: \"redis://" + e.srv.Addr() + "/0\"}\nnamespace: " + ns + "\nworker: {shutdown_grace: 2s}\njobs:\n  - name: long\n    schedule: \"@every 1m\"\n    max_retry: 0\n    handler: {name: long}\n"
		cfg, err := Load([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	prod, staging := load("prod"), load("staging")
	execProd, execStaging := newFakeExec(blockUntil(nil)), newFakeExec(blockUntil(nil))
	for _, w := range []struct {
		cfg  *Config
		exec *fakeExec
	}{{prod, execProd}, {staging, execStaging}} {
		// each deployment's lock client has its namespace's prefix, as baton run's
		locks, err := locking.New([]redis.UniversalClient{e.rdb}, locking.WithFreshDeployment(), locking.WithPrefix(w.cfg.Namespace+":lock:"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { locks.Close() })
		wk := NewWorker(w.cfg, e.opt, locks, w.exec, WithPollIntervals(10*time.Millisecond, 20*time.Millisecond), WithReplica(w.cfg.Namespace+"-1"))
		if err := wk.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			_ = wk.Shutdown(ctx)
		})
	}
	tk := tickOf("long", 1)
	e.dispatch(t, prod, tk)
	e.dispatch(t, staging, tk)
	recv(t, execProd.started, "prod's run")
	recv(t, execStaging.started, "staging's run")
	// an operator cancels "the" task through asynq's inspector: the channel
	// is shared by both deployments and keyed by task ID alone, so baton's
	// workers do not listen to it; neither run stops, neither task fails
	if err := e.insp.CancelProcessing(tk.ID()); err != nil {
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
		if info, err := e.insp.GetTaskInfo(q, tk.ID()); err != nil || info.State != asynq.TaskStateActive {
			t.Errorf("%s task after the cancel: %+v, %v; want still active", q, info, err)
		}
	}
}

// "logs once per job and reason (a writer to Redis must not flood the
// log)": the job name, the tick and the namespace in a forged payload are
// the writer's to choose, and the once-only key is built from them (the
// reason's text names the tick); asynq's ErrorHandler (handleError) then
// logs every refused task again as "task failed". 40 forged tasks give 80
// lines here, and each distinct key stays in the worker's maps for good:
// the log and the memory grow with what the writer enqueues.
func TestForgedTasksFloodTheLog_review9(t *testing.T) {
	e := newEnv(t)
	cfg := e.signedConfig(t, []string{keyA}, false, "  - name: job\n    schedule: \"@every 1m\"\n    handler: {name: job}\n")
	logs := &logBuf{}
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec, WithLogger(logs.logger()))
	const n = 40
	for i := range n {
		tk := tickOf("job", 0)
		tk.At = tk.At.Add(time.Duration(i) * time.Minute)
		tk.Job = "forged-" + strconv.Itoa(i) // any name
		e.enqueueRaw(t, tk.ID(), payloadOf(tk))
	}
	eventually(t, func() bool {
		q, err := e.insp.GetQueueInfo("baton:default")
		return err == nil && q.Archived == n
	}, "%d forged tasks archived", n)
	time.Sleep(200 * time.Millisecond)
	lines := logs.count("refusing") + logs.count("task failed")
	if lines > 4 {
		t.Errorf("%d forged tasks wrote %d error lines (refusing: %d, task failed: %d); want a bounded number", n, lines, logs.count("refusing"), logs.count("task failed"))
	}
	none(t, exec.started, 10*time.Millisecond, "a forged run")
}

// scheduler.max_tick_records counts retention / the shortest interval, as
// if the schedule fired at that rate around the clock. A business-hours
// poll (every 10 s, 09:00-16:59 Monday to Friday) with a 60 h
// starting_deadline keeps at most 3 x 2880 = 8640 records in any 60 h
// window, below the default 10000, but is refused as "21607 tick records".
func TestMaxTickRecordsCountsTicksThatNeverFire_review9(t *testing.T) {
	_, err := Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: poll\n    schedule: \"*/10 * 9-16 * * 1-5\"\n    starting_deadline: 60h\n    handler: {name: poll}\n"))
	if err != nil {
		t.Errorf("a job whose records never exceed 8640 refused: %v", err)
	}
}

// The alias bound counts bytes as if each alias were a copy; yaml.v3
// decodes an aliased string into the same Go string, so nothing is copied.
// One 200 KiB script anchored once and used by 100 jobs (the kind of thing
// anchors are for) is refused as an alias bomb; so is any plain file over
// 16 MiB, with a message about aliases it does not have.
func TestAliasByteBoundRefusesSharedScript_review9(t *testing.T) {
	script := strings.Repeat("echo line of a long maintenance script\n", 200<<10/40)
	var b strings.Builder
	b.WriteString("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: maint\n    schedule: \"@daily\"\n    exec:\n      command:\n        - sh\n        - -c\n        - &maint |\n")
	for l := range strings.Lines(script) {
		b.WriteString("          " + l)
	}
	for i := range 100 {
		b.WriteString("  - name: j" + strconv.Itoa(i) + "\n    schedule: \"@hourly\"\n    exec: {command: [\"sh\", \"-c\", *maint]}\n")
	}
	_, err := Load([]byte(b.String()))
	if err != nil {
		t.Errorf("a %d KiB file with one shared script refused: %v", b.Len()>>10, err)
	}
}

// outputTail masks the job's env values one by one in map order, not
// longest first: with env {USER_ID: "tok1", TOKEN: "tok1-very-secret-part"}
// a tail that prints TOKEN comes out as "xxxxx-very-secret-part" whenever
// USER_ID is replaced first (about half the runs). And it cuts the output
// to its last 2 KiB before masking: a secret the cut falls into loses its
// first byte and is printed without it.
func TestOutputTailLeaksSecrets_review9(t *testing.T) {
	job := &Job{Name: "j", Exec: &ExecSpec{Command: []string{"x"}, Env: map[string]string{
		"USER_ID": "tok1", "TOKEN": "tok1-very-secret-part", "A": "aaaa", "B": "bbbb", "C": "cccc"}}}
	for range 50 {
		if tail := outputTail([]byte("token is tok1-very-secret-part\n"), job); strings.Contains(tail, "very-secret-part") {
			t.Errorf("env masking order: tail %q", tail)
			break
		}
	}
	secret := "S3cr3t-0123456789-abcdefghijklmnopqrstuv"
	job2 := &Job{Name: "j", Exec: &ExecSpec{Command: []string{"x"}, Env: map[string]string{"TOKEN": secret}}}
	out := "the token: " + secret + strings.Repeat("-", 2048-len(secret)+1) + "\n"
	if tail := outputTail([]byte(out), job2); strings.Contains(tail, secret[1:]) {
		t.Errorf("the 2 KiB cut fell inside the secret: the tail starts %q", tail[:50])
	}
}
