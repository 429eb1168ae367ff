package worker

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/locking"
)

// asynq's cancel channel (asynq:cancel) is shared by every deployment and
// needs no key: a PUBLISH of a task ID there stops no baton run (the
// worker's asynq server listens on NS:asynq-cancel instead).
func TestAsynqCancelChannelStopsNoRun(t *testing.T) {
	t.Parallel()
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

// Two deployments on one Redis run the same job@tick: a cancel through
// asynq's inspector (a shared channel, keyed by task ID alone) stops
// neither run and fails neither task.
func TestAsynqCancelCrossesNoNamespace(t *testing.T) {
	t.Parallel()
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

// asynq's "Retry exhausted" warning of a task that ended on purpose (its
// handler found it replaced, stopped on request or refused) is a debug
// line, once; any other task's stays a warning.
func TestMeantEndIsNoRetryExhaustedWarning(t *testing.T) {
	t.Parallel()
	var logs strings.Builder
	var meant sync.Map
	meant.Store("stopped-1", true)
	l := asynqLogger{l: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), meant: &meant}
	l.Warn("Retry exhausted for task id=stopped-1")
	l.Warn("Retry exhausted for task id=failed-2")
	l.Warn("Retry exhausted for task id=stopped-1") // taken once
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "level=DEBUG") || !strings.Contains(lines[1], "level=WARN") || !strings.Contains(lines[2], "level=WARN") {
		t.Fatalf("logged:\n%s", logs.String())
	}
}
