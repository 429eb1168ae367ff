package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// env is one real Redis with the clients a worker test needs, and the
// worker and hand-off built on it.
type env struct{ *worktest.Env }

func newEnv(t testing.TB, opts ...redistest.Option) *env { return &env{worktest.NewEnv(t, opts...)} }

// worker starts a worker and shuts it down at cleanup.
func (e *env) worker(t testing.TB, cfg *config.Config, exec executor.Runner, opts ...Option) *Worker {
	t.Helper()
	return e.workerOn(t, e.Opt, cfg, exec, opts...)
}

// workerOn is worker with the queue Redis reached through opt.
func (e *env) workerOn(t testing.TB, opt asynq.RedisConnOpt, cfg *config.Config, exec executor.Runner, opts ...Option) *Worker {
	t.Helper()
	return e.workerWith(t, opt, e.Locks, cfg, exec, opts...)
}

// workerWith is workerOn with its own locking client.
func (e *env) workerWith(t testing.TB, opt asynq.RedisConnOpt, locks *locking.Client, cfg *config.Config, exec executor.Runner, opts ...Option) *Worker {
	t.Helper()
	opts = append([]Option{WithPollIntervals(10*time.Millisecond, 20*time.Millisecond), WithLogger(worktest.Logger(t))}, opts...)
	w := New(cfg, opt, locks, exec, opts...)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil && !strings.Contains(err.Error(), "already shut down") {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return w
}

// dispatch enqueues tick t through a Dispatcher, as the scheduler does (a
// tick already enqueued counts as dispatched, as it does for the scheduler).
func (e *env) dispatch(t testing.TB, cfg *config.Config, tick scheduler.Tick) {
	t.Helper()
	err := handoff.New(cfg, e.Client, nil).Dispatch(context.Background(), tick)
	if err != nil && !errors.Is(err, scheduler.ErrAlreadyDispatched) {
		t.Fatal(err)
	}
}

// fakeExec is a test double of the executor interface: it reports each run's
// start and end on channels and behaves as fn says (nil: succeed at once).
type fakeExec struct {
	started chan started
	ended   chan ended
	fn      func(ctx context.Context, run jobs.Run, v executor.Validity) error
}

type started struct {
	run jobs.Run
	v   executor.Validity
	ctx context.Context
}

type ended struct {
	run   jobs.Run
	err   error
	cause error
}

func newFakeExec(fn func(ctx context.Context, run jobs.Run, v executor.Validity) error) *fakeExec {
	return &fakeExec{started: make(chan started, 64), ended: make(chan ended, 64), fn: fn}
}

func (f *fakeExec) Execute(ctx context.Context, job *config.Job, run jobs.Run, v executor.Validity) (jobs.Result, error) {
	f.started <- started{run, v, ctx}
	var err error
	if f.fn != nil {
		err = f.fn(ctx, run, v)
	}
	f.ended <- ended{run, err, context.Cause(ctx)}
	var res jobs.Result
	return res, err
}

// blockUntil returns an fn that blocks until gate is closed (then succeeds)
// or ctx ends (then fails with ctx's cause).
func blockUntil(gate <-chan struct{}) func(ctx context.Context, run jobs.Run, v executor.Validity) error {
	return func(ctx context.Context, _ jobs.Run, _ executor.Validity) error {
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// none checks that nothing arrives on ch for d.
func none[T any](t *testing.T, ch <-chan T, d time.Duration, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %+v", what, v)
	case <-time.After(d):
	}
}

func TestWorkerRunsTickOnceWithIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    handler: {name: report, payload: {a: 1}}
`)
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec, WithReplica("worker-1"))
	tick := worktest.TickOf("report", 1)
	e.dispatch(t, cfg, tick)
	e.dispatch(t, cfg, tick) // the same tick again: task ID conflict, already dispatched

	s := worktest.Recv(t, exec.started, "run")
	r := s.run
	if r.Job != "report" || !r.Tick.Equal(tick.At) || r.RunID != tick.RunID || r.Attempt != 1 || r.Replica != "worker-1" || string(r.Payload) != `{"a":1}` {
		t.Errorf("run = %+v", r)
	}
	lease, ok := s.v.(*locking.Lease)
	if !ok || lease.Fence() != r.Fence || r.Fence <= 0 || lease.Key() != "exec:report" {
		t.Errorf("validity = %T %v, fence %d", s.v, s.v, r.Fence)
	}
	if d := time.Until(s.v.Deadline()); d <= 0 || d > 30*time.Second {
		t.Errorf("validity deadline in %s", d)
	}
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	e.dispatch(t, cfg, tick) // retained: still a conflict
	none(t, exec.started, 200*time.Millisecond, "second run")
	if st := New(cfg, e.Opt, e.Locks, exec).Stats(); st != (Stats{}) {
		t.Errorf("fresh worker stats %+v", st)
	}
	// The lease was released: the lock is free at once.
	l, err := e.Locks.TryLock(context.Background(), "exec:report", time.Second)
	if err != nil {
		t.Fatalf("execution lease not released: %v", err)
	}
	l.Release(context.Background())
}

func TestForbidSkipsOverlap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: slow
    schedule: "@every 1m"
    handler: {name: slow}
`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec)
	t1, t2 := worktest.TickOf("slow", 1), worktest.TickOf("slow", 2)
	e.dispatch(t, cfg, t1)
	first := worktest.Recv(t, exec.started, "first run")
	e.dispatch(t, cfg, t2)
	info := e.State(t, "baton:default", t2, asynq.TaskStateCompleted) // skipped = success
	if info.Retried != 0 || info.LastErr != "" {
		t.Errorf("skipped task: retried %d, last error %q", info.Retried, info.LastErr)
	}
	if st := w.Stats(); st.Skipped != 1 || st.Ran != 0 {
		t.Errorf("stats %+v", st)
	}
	if first.ctx.Err() != nil {
		t.Error("the running run was disturbed")
	}
	close(gate)
	if end := worktest.Recv(t, exec.ended, "first run's end"); end.err != nil || !end.run.Tick.Equal(t1.At) {
		t.Errorf("first run ended: %+v", end)
	}
	e.State(t, "baton:default", t1, asynq.TaskStateCompleted)
	none(t, exec.started, 100*time.Millisecond, "run of the skipped tick")
	if st := w.Stats(); st.Skipped != 1 || st.Ran != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestSameTickRetryWaitsForItsEarlierAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: job
    schedule: "@every 1m"
    handler: {name: job}
`)
	exec := newFakeExec(nil)
	w := e.worker(t, cfg, exec)
	tick := worktest.TickOf("job", 1)
	// An earlier attempt of this tick holds the lease.
	ctx := context.Background()
	held, err := e.Locks.Lock(ctx, "exec:job", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(holderRecord{ID: tick.ID(), Tick: tick.At.Format(time.RFC3339), RunID: tick.RunID, Attempt: 1, Replica: "other"})
	if err := e.RDB.Set(ctx, "baton:{exec:job}:holder", rec, 0).Err(); err != nil {
		t.Fatal(err)
	}
	e.dispatch(t, cfg, tick)
	e.State(t, "baton:default", tick, asynq.TaskStateActive)
	none(t, exec.started, 200*time.Millisecond, "run while the earlier attempt holds the lease")
	if st := w.Stats(); st.Skipped != 0 {
		t.Fatalf("stats %+v", st)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	s := worktest.Recv(t, exec.started, "run after the earlier attempt let go")
	if s.run.Fence <= held.Fence() {
		t.Errorf("fence %d, earlier holder's %d", s.run.Fence, held.Fence())
	}
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	if st := w.Stats(); st.Ran != 1 || st.Skipped != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestReplaceAcrossWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: sync
    schedule: "@every 1m"
    concurrency: replace
    handler: {name: sync}
`)
	cfg.Worker.Concurrency = 1 // one run per worker: the newer tick goes to the other one
	exec1 := newFakeExec(blockUntil(nil))
	exec2 := newFakeExec(nil)
	w1 := e.worker(t, cfg, exec1, WithReplica("w1"))
	t1, t2 := worktest.TickOf("sync", 1), worktest.TickOf("sync", 2)
	e.dispatch(t, cfg, t1)
	old := worktest.Recv(t, exec1.started, "old run on w1")
	w2 := e.worker(t, cfg, exec2, WithReplica("w2"))
	e.dispatch(t, cfg, t2)

	end := worktest.Recv(t, exec1.ended, "old run's end")
	if !errors.Is(end.cause, ErrReplaced) || !end.run.Tick.Equal(t1.At) {
		t.Errorf("old run ended with %v (cause %v)", end.err, end.cause)
	}
	s := worktest.Recv(t, exec2.started, "new run on w2")
	if !s.run.Tick.Equal(t2.At) || s.run.Replica != "w2" || s.run.Fence <= old.run.Fence {
		t.Errorf("new run %+v (old fence %d)", s.run, old.run.Fence)
	}
	info := e.State(t, "baton:default", t1, asynq.TaskStateArchived) // replaced: not retried
	if info.Retried != 0 || !strings.Contains(info.LastErr, "replaced") {
		t.Errorf("replaced task: retried %d, last error %q", info.Retried, info.LastErr)
	}
	e.State(t, "baton:default", t2, asynq.TaskStateCompleted)
	if st := w1.Stats(); st.Replaced != 1 || st.Failed != 0 {
		t.Errorf("w1 stats %+v", st)
	}
	if st := w2.Stats(); st.Ran != 1 {
		t.Errorf("w2 stats %+v", st)
	}
}

func TestReplaceOlderTickNeverReplacesNewer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: sync
    schedule: "@every 1m"
    concurrency: replace
    handler: {name: sync}
`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec)
	newer, older := worktest.TickOf("sync", 2), worktest.TickOf("sync", 1)
	e.dispatch(t, cfg, newer)
	running := worktest.Recv(t, exec.started, "newer run")
	e.dispatch(t, cfg, older)
	e.State(t, "baton:default", older, asynq.TaskStateCompleted) // skipped
	if running.ctx.Err() != nil {
		t.Fatalf("the newer run was stopped: %v", context.Cause(running.ctx))
	}
	if st := w.Stats(); st.Skipped != 1 || st.Replaced != 0 {
		t.Errorf("stats %+v", st)
	}
	close(gate)
	e.State(t, "baton:default", newer, asynq.TaskStateCompleted)
	none(t, exec.started, 100*time.Millisecond, "run of the older tick")
}

// TestCancelRequestOnlyStopsOlderTicks checks the receiving side of replace:
// a request cancels runs of older ticks of its job, and nothing else.
func TestCancelRequestOnlyStopsOlderTicks(t *testing.T) {
	t.Parallel()
	var e engine
	e.log = slog.New(slog.DiscardHandler)
	mk := func(job string, minute int) (*activeRun, context.Context) {
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		ar := &activeRun{at: worktest.TickOf(job, minute).At, cancel: cancel}
		e.register(job, ar)
		return ar, ctx
	}
	_, older := mk("a", 1)
	_, same := mk("a", 2)
	_, newer := mk("a", 3)
	_, other := mk("b", 1)
	req, _ := json.Marshal(cancelRequest{ID: worktest.TickOf("a", 2).ID(), Tick: worktest.TickOf("a", 2).At.Format(time.RFC3339)})
	e.onCancelRequest("a", string(req))
	if !errors.Is(context.Cause(older), ErrReplaced) {
		t.Errorf("older run: %v", context.Cause(older))
	}
	for name, ctx := range map[string]context.Context{"same tick": same, "newer": newer, "other job": other} {
		if ctx.Err() != nil {
			t.Errorf("%s run cancelled", name)
		}
	}
	e.onCancelRequest("a", "not json") // logged, ignored
}

func TestAllowOverlaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: par
    schedule: "@every 1m"
    concurrency: allow
    handler: {name: par}
`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec)
	t1, t2 := worktest.TickOf("par", 1), worktest.TickOf("par", 2)
	e.dispatch(t, cfg, t1)
	e.dispatch(t, cfg, t2)
	fences := map[int64]bool{}
	for range 2 {
		s := worktest.Recv(t, exec.started, "overlapping run")
		if s.v != nil {
			t.Errorf("allow run got validity %v", s.v)
		}
		fences[s.run.Fence] = true
	}
	// each run's fence comes from the lock masters, not from the payload
	if len(fences) != 2 || fences[t1.Fence] || fences[t2.Fence] || fences[0] {
		t.Errorf("fences %v: want two distinct fences from the lock masters, not the dispatch fences %d and %d", fences, t1.Fence, t2.Fence)
	}
	close(gate)
	e.State(t, "baton:default", t1, asynq.TaskStateCompleted)
	e.State(t, "baton:default", t2, asynq.TaskStateCompleted)
	if st := w.Stats(); st.Ran != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestUnknownJobIsArchived(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: known
    schedule: "@every 1m"
    handler: {name: known}
`)
	exec := newFakeExec(nil)
	w := e.worker(t, cfg, exec)
	ghost := &config.Job{Name: "ghost", Queue: "default", Timeout: time.Minute, MaxRetry: 5, StartingDeadline: time.Minute}
	tick := worktest.TickOf("ghost", 1)
	task, err := handoff.NewRunTask(cfg, ghost, tick)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Enqueue(task); err != nil {
		t.Fatal(err)
	}
	info := e.State(t, "baton:default", tick, asynq.TaskStateArchived)
	if info.Retried != 0 || !strings.Contains(info.LastErr, "ghost") {
		t.Errorf("retried %d, last error %q", info.Retried, info.LastErr)
	}
	if st := w.Stats(); st.Failed != 1 {
		t.Errorf("stats %+v", st)
	}
	none(t, exec.started, 50*time.Millisecond, "run of an unknown job")
}

func TestFailedRunIsRetriedPerMaxRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: flaky
    schedule: "@every 1m"
    max_retry: 1
    retry_backoff: 10ms
    handler: {name: flaky}
`)
	exec := newFakeExec(func(context.Context, jobs.Run, executor.Validity) error { return errors.New("boom") })
	w := e.worker(t, cfg, exec)
	tick := worktest.TickOf("flaky", 1)
	start := time.Now()
	e.dispatch(t, cfg, tick)
	for want := 1; want <= 2; want++ {
		if s := worktest.Recv(t, exec.started, "attempt"); s.run.Attempt != want {
			t.Errorf("attempt %d, want %d", s.run.Attempt, want)
		}
	}
	info := e.State(t, "baton:default", tick, asynq.TaskStateArchived)
	if info.Retried != 1 || !strings.Contains(info.LastErr, "boom") {
		t.Errorf("retried %d, last error %q", info.Retried, info.LastErr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("retry took %s: retry_backoff 10ms not honoured", took)
	}
	none(t, exec.started, 100*time.Millisecond, "a third attempt")
	if st := w.Stats(); st.Failed != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestLeaseLostMidRunIsRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: lossy
    schedule: "@every 1m"
    max_retry: 1
    retry_backoff: 10ms
    lock_ttl: 1s
    handler: {name: lossy}
`)
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, _ executor.Validity) error {
		if run.Attempt > 1 {
			return nil
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	w := e.worker(t, cfg, exec)
	tick := worktest.TickOf("lossy", 1)
	e.dispatch(t, cfg, tick)
	worktest.Recv(t, exec.started, "first attempt")
	// The key vanishes (as if expired while the holder was frozen): the next
	// extension finds it gone and the lease ends.
	if err := e.RDB.Del(context.Background(), "baton:lock:{exec:lossy}").Err(); err != nil {
		t.Fatal(err)
	}
	end := worktest.Recv(t, exec.ended, "first attempt's end")
	if !errors.Is(end.cause, locking.ErrLost) {
		t.Errorf("first attempt ended with cause %v", end.cause)
	}
	if s := worktest.Recv(t, exec.started, "retry"); s.run.Attempt != 2 {
		t.Errorf("retry attempt %d", s.run.Attempt)
	}
	info := e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	if info.Retried != 1 || !strings.Contains(info.LastErr, "lease lost") {
		t.Errorf("retried %d, last error %q", info.Retried, info.LastErr)
	}
	if st := w.Stats(); st.Failed != 1 || st.Ran != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestShutdownCancelsAfterGraceAndReleases(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: long
    schedule: "@every 1m"
    handler: {name: long}
  - name: loc
    schedule: "@every 1m"
    mode: local
    handler: {name: loc}
`)
	cfg.Worker.ShutdownGrace = 200 * time.Millisecond
	exec := newFakeExec(blockUntil(nil))
	w := e.worker(t, cfg, exec)
	tick := worktest.TickOf("long", 1)
	e.dispatch(t, cfg, tick)
	queued := worktest.Recv(t, exec.started, "queued run")
	job, _ := cfg.Job("loc")
	if err := w.RunLocal(context.Background(), job, worktest.TickOf("loc", 1)); err != nil {
		t.Fatal(err)
	}
	local := worktest.Recv(t, exec.started, "local run")

	ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
	defer cancel()
	start := time.Now()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < cfg.Worker.ShutdownGrace {
		t.Errorf("Shutdown took %s, less than the grace", took)
	}
	for _, s := range []started{queued, local} {
		if s.ctx.Err() == nil {
			t.Errorf("run %s still running after Shutdown", s.run.Job)
		}
		if _, err := e.Locks.TryLock(ctx, "exec:"+s.run.Job, time.Second); err != nil {
			t.Errorf("lease of %s not released: %v", s.run.Job, err)
		}
	}
	e.State(t, "baton:default", tick, asynq.TaskStatePending) // pushed back, not retried
	if err := w.RunLocal(ctx, job, worktest.TickOf("loc", 2)); err == nil {
		t.Error("RunLocal after Shutdown succeeded")
	}
}

func TestShutdownDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: long
    schedule: "@every 1m"
    handler: {name: long}
`)
	cfg.Worker.ShutdownGrace = time.Minute
	exec := newFakeExec(blockUntil(nil))
	w := e.worker(t, cfg, exec)
	e.dispatch(t, cfg, worktest.TickOf("long", 1))
	s := worktest.Recv(t, exec.started, "run")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := w.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the deadline", err)
	}
	if !errors.Is(context.Cause(s.ctx), errShutdown) {
		t.Errorf("run's cause %v", context.Cause(s.ctx))
	}
	if l, err := e.Locks.TryLock(context.Background(), "exec:long", time.Second); err != nil {
		t.Errorf("lease not released: %v", err)
	} else {
		l.Release(context.Background())
	}
}

// TestWorkerLogsCarryRunIdentity checks that a run's log lines carry job,
// tick, run_id, fence and replica.
func TestWorkerLogsCarryRunIdentity(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: report
    schedule: "@every 1m"
    handler: {name: report}
`)
	logs := &worktest.Logs{}
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec, WithLogger(logs.Logger()), WithReplica("r-9"))
	tick := worktest.TickOf("report", 1)
	e.dispatch(t, cfg, tick)
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	n := 0
	for _, l := range logs.All() {
		if l["job"] != "report" {
			continue
		}
		n++
		if l["tick"] != tick.At.Format(time.RFC3339) || l["run_id"] != tick.RunID || l["replica"] != "r-9" || l["fence"] == nil {
			t.Errorf("log line without the run's identity: %v", l)
		}
	}
	if n < 2 {
		t.Errorf("%d run log lines", n)
	}
}

// TestWorkerWithRealExecutor runs an exec job through the worker and the real
// Executor (its supervisor is this test binary, see TestMain): the command
// sees the run's identity, with the execution lease's fence.
func TestWorkerWithRealExecutor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	out := t.TempDir() + "/out"
	cfg := e.Config(t, fmt.Sprintf(`  - name: report
    schedule: "@every 1m"
    exec:
      command: [sh, -c, 'echo "$BATON_JOB $BATON_TICK $BATON_RUN_ID $BATON_ATTEMPT $BATON_FENCING_TOKEN $BATON_REPLICA" > %s']
`, out))
	w := e.worker(t, cfg, executor.New(), WithReplica("real-1"))
	tick := worktest.TickOf("report", 1)
	e.dispatch(t, cfg, tick)
	e.State(t, "baton:default", tick, asynq.TaskStateCompleted)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data))
	if len(f) != 6 || f[0] != "report" || f[1] != tick.At.Format(time.RFC3339) || f[2] != tick.RunID || f[3] != "1" || f[5] != "real-1" {
		t.Fatalf("command saw %q", data)
	}
	fence, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil || fence <= 0 || fence == tick.Fence {
		t.Errorf("BATON_FENCING_TOKEN = %q: want the execution lease's fence", f[4])
	}
	if st := w.Stats(); st.Ran != 1 {
		t.Errorf("stats %+v", st)
	}
}

// A failed run's log line carries the end of its output, with the job's own
// env values masked; a command that cannot start fails once, not once per
// retry.
func TestFailedRunsShowWhy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: fails
    schedule: "@every 1m"
    max_retry: 0
    exec:
      command: [sh, -c, 'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo "line $i"; done; echo "token $TOKEN"; exit 3']
      env: {TOKEN: s3cret-value}
  - name: missing
    schedule: "@every 1m"
    max_retry: 5
    exec:
      command: [/no/such/baton-test-binary]
`)
	logs := &worktest.Logs{}
	e.worker(t, cfg, executor.New(), WithLogger(logs.Logger()))
	fails, missing := worktest.TickOf("fails", 1), worktest.TickOf("missing", 1)
	e.dispatch(t, cfg, fails)
	e.dispatch(t, cfg, missing)
	e.State(t, "baton:default", fails, asynq.TaskStateArchived)
	info := e.State(t, "baton:default", missing, asynq.TaskStateArchived)
	if info.Retried != 0 {
		t.Errorf("a command that cannot start was retried %d times", info.Retried)
	}
	var tail string
	for _, l := range logs.All() {
		if l["job"] == "fails" && l["msg"] == "run failed" {
			tail, _ = l["output_tail"].(string)
		}
	}
	if !strings.HasSuffix(tail, "line 12\ntoken xxxxx") || strings.Contains(tail, "line 2\n") || strings.Contains(tail, "s3cret") {
		t.Errorf("output_tail = %q, want the last 10 lines with the secret masked", tail)
	}
}

// A forward step of the queue Redis's clock (30 s, and beyond the roster's
// forget window) makes no worker archive a task it cannot run while the
// replica that can has not beaten yet under the new clock: the task is
// handed back, and runs once that replica's worker starts.
func TestQueueClockStepForwardArchivesNothing(t *testing.T) {
	t.Parallel()
	for _, step := range []time.Duration{30 * time.Second, 15 * time.Minute} {
		t.Run("+"+step.String(), func(t *testing.T) {
			clock := redistest.NewTestClock(t)
			e := newEnv(t, redistest.WithClock(clock))
			oldCfg := e.Config(t, `  - name: known
    schedule: "@every 1m"
    handler: {name: known}
`)
			newCfg := e.Config(t, `  - name: known
    schedule: "@every 1m"
    handler: {name: known}
  - name: added
    schedule: "@every 1m"
    max_retry: 0
    handler: {name: added}
`)
			oldExec := newFakeExec(nil)
			logs := &worktest.Logs{}
			e.worker(t, oldCfg, oldExec, WithReplica("old"), WithLogger(logs.Logger()))
			// the new replica is live in the roster, its worker not fetching yet
			newSelf := roster.New(e.RDB, newCfg, roster.Member{ID: "new", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
			if _, err := newSelf.Beat(context.Background()); err != nil {
				t.Fatal(err)
			}

			if err := clock.Step(step); err != nil {
				t.Fatal(err)
			}
			added := worktest.TickOf("added", 1)
			e.dispatch(t, newCfg, added)
			poll.Require(t, worktest.Wait, added.ID()+" handed back or archived", func() bool {
				info, err := e.Insp.GetTaskInfo("baton:default", added.ID())
				return err == nil && (info.State == asynq.TaskStateArchived ||
					info.State == asynq.TaskStateRetry && strings.Contains(info.LastErr, "handed back"))
			})
			info, _ := e.Insp.GetTaskInfo("baton:default", added.ID())
			if info.State == asynq.TaskStateArchived {
				t.Fatalf("archived after a step of %v: %s", step, info.LastErr)
			}
			if info.Retried != 0 {
				t.Errorf("handed back after the step with retried %d, last error %q", info.Retried, info.LastErr)
			}
			if n := logs.Count("archiving a task no live replica can run: its job is in no live replica's job list in cron mode on its queue"); n != 0 {
				t.Errorf("archived %d times after a step of %v:\n%s", n, step, logs.String())
			}

			// the new replica beats under the new clock and its worker runs the tick once
			if _, err := newSelf.Beat(context.Background()); err != nil {
				t.Fatal(err)
			}
			newExec := newFakeExec(nil)
			e.worker(t, newCfg, newExec, WithReplica("new"))
			if s := worktest.Recv(t, newExec.started, "run of the handed-back tick"); s.run.Job != "added" || s.run.Attempt != 1 {
				t.Errorf("ran %s as attempt %d", s.run.Job, s.run.Attempt)
			}
			e.State(t, "baton:default", added, asynq.TaskStateCompleted)
			none(t, oldExec.started, 10*time.Millisecond, "a run on the old worker")
		})
	}
}

// Schedule: a newer tick's run takes the execution lease, and an older
// tick's task reads the holder record before the newer run wrote it (it is
// written just after the lease is taken). The older one goes to replace,
// asks older runs to stop (the newer ignores it) and waits for the lease:
// it must give way as soon as the holder record shows the newer tick,
// skipped, and never run after the newer one ends.
func TestReplaceOlderTickGivesWayToANewerHolderSeenLate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: sync
    schedule: "@every 1m"
    concurrency: replace
    lock_ttl: 1s
    handler: {name: sync}
`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec)
	ctx := context.Background()
	newer, older := worktest.TickOf("sync", 2), worktest.TickOf("sync", 1)
	e.dispatch(t, cfg, newer)
	running := worktest.Recv(t, exec.started, "newer run")
	// the holder record is kept away until the older task asks to replace
	sub := e.RDB.Subscribe(ctx, "baton:cancel:sync")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	holder := "baton:{exec:sync}:holder"
	asked := make(chan struct{})
	go func() {
		defer close(asked)
		<-sub.Channel()
	}()
	e.dispatch(t, cfg, older)
	poll.Require(t, 10*time.Second, "the older task's replace request", func() bool {
		select {
		case <-asked:
			return true
		default:
			e.RDB.Del(ctx, holder)
			return false
		}
	})
	e.State(t, "baton:default", older, asynq.TaskStateCompleted) // skipped, while the newer runs
	if running.ctx.Err() != nil {
		t.Fatalf("the newer run was stopped: %v", context.Cause(running.ctx))
	}
	if st := w.Stats(); st.Skipped != 1 {
		t.Errorf("stats %+v, want the older tick skipped", st)
	}
	close(gate)
	e.State(t, "baton:default", newer, asynq.TaskStateCompleted)
	none(t, exec.started, 100*time.Millisecond, "run of the older tick")
}

func TestDispatchLocalRunsInProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: cleanup
    schedule: "@every 1m"
    mode: local
    handler: {name: cleanup}
`)
	exec := newFakeExec(nil)
	w := New(cfg, e.Opt, e.Locks, exec, WithLocalOnly(), WithReplica("sched-1"), WithLogger(worktest.Logger(t)))
	d := handoff.New(cfg, e.Client, w)
	tick := worktest.TickOf("cleanup", 1)
	if err := d.Dispatch(context.Background(), tick); err == nil {
		t.Error("Dispatch to a worker not started succeeded")
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(context.Background(), tick); err != nil {
		t.Fatal(err)
	}
	s := worktest.Recv(t, exec.started, "local run")
	if s.run.Attempt != 1 || s.run.Replica != "sched-1" || !s.run.Tick.Equal(tick.At) || s.v == nil {
		t.Errorf("local run %+v, validity %v", s.run, s.v)
	}
	worktest.Recv(t, exec.ended, "local run's end")
	if qs, _ := e.Insp.Queues(); len(qs) != 0 {
		t.Errorf("a local run touched the queues: %v", qs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Ran != 1 {
		t.Errorf("stats %+v", st)
	}
	if err := d.Dispatch(context.Background(), worktest.TickOf("cleanup", 2)); err == nil {
		t.Error("Dispatch after Shutdown succeeded")
	}
}

func TestLocalDuplicateOfRunningTickIsSkipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: cleanup
    schedule: "@every 1m"
    mode: local
    handler: {name: cleanup}
`)
	gate := make(chan struct{})
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec, WithLocalOnly())
	job, _ := cfg.Job("cleanup")
	tick := worktest.TickOf("cleanup", 1)
	if err := w.RunLocal(context.Background(), job, tick); err != nil {
		t.Fatal(err)
	}
	worktest.Recv(t, exec.started, "local run")
	if err := w.RunLocal(context.Background(), job, tick); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, worktest.Wait, "the duplicate to be skipped", func() bool { return w.Stats().Skipped == 1 })
	close(gate)
	worktest.Recv(t, exec.ended, "local run's end")
}

// A job changed from concurrency allow to forbid (a rolling deploy, one
// replica on each config): forbid holds the job's execution lease, and an
// allow run takes none (only a momentary one for its fence), so the first
// forbid run starts while an allow run of the old config is still under
// way: the change does not wait for them (docs/scheduling.md says to let
// them end, or stop them, first).
func TestConcurrencyChangeFromAllowToForbidDoesNotWaitForAllowRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	job := func(c string) string {
		return `  - name: par
    schedule: "@every 1m"
    concurrency: ` + c + `
    handler: {name: par}
`
	}
	allowCfg := e.Config(t, job("allow"), "{shutdown_grace: 2s, concurrency: 1}")
	forbidCfg := e.Config(t, job("forbid"), "{shutdown_grace: 2s, concurrency: 1}")
	gate := make(chan struct{})
	defer close(gate)
	allowExec, forbidExec := newFakeExec(blockUntil(gate)), newFakeExec(blockUntil(gate))
	e.worker(t, allowCfg, allowExec) // the replica of the old config
	t1, t2 := worktest.TickOf("par", 1), worktest.TickOf("par", 2)
	e.dispatch(t, allowCfg, t1)
	worktest.Recv(t, allowExec.started, "the allow run of the old config")
	// the old replica's one slot is taken: the next tick goes to the new
	e.worker(t, forbidCfg, forbidExec)
	e.dispatch(t, forbidCfg, t2)
	if s := worktest.Recv(t, forbidExec.started, "the first forbid run"); s.run.Tick.Equal(t1.At) {
		t.Fatalf("the forbid replica ran the allow run's tick")
	}
	// both are under way now: the change overlapped them
}

// A worker whose start fails half way stops what it had started, in
// reverse: here the queue Redis's user may run every command but
// subscribe to no channel, so the replace subscription fails after the
// heartbeat put the replica in the roster. Start names the part; the
// replica leaves the roster at once (not when its entry expires) and the
// worker's connections are closed.
func TestAWorkerWhoseStartFailsStopsWhatItStarted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	if err := e.RDB.Do(ctx, "ACL", "SETUSER", "nosub", "on", ">pw", "~*", "resetchannels", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.RDB.Do(context.Background(), "ACL", "DELUSER", "nosub") })
	cfg := e.Config(t, `  - name: r
    schedule: "@every 1m"
    concurrency: replace
    exec: {command: ["true"]}
`)
	opt := asynq.RedisClientOpt{Addr: e.Srv.Addr(), Username: "nosub", Password: "pw"}
	w := New(cfg, opt, e.Locks, newFakeExec(nil), WithReplica("half"), WithLogger(worktest.Logger(t)))
	err := w.Start()
	if err == nil || !strings.Contains(err.Error(), "replace requests") || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("Start = %v, want the replace requests' part named with Redis's NOPERM", err)
	}
	members, err := roster.Read(ctx, e.RDB, cfg.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.ID == "half" {
			t.Errorf("the replica is still in the roster after its start failed: %+v", m)
		}
	}
	if list := e.RDB.ClientList(ctx).Val(); strings.Contains(list, "user=nosub") {
		t.Errorf("the worker's connections are still open after its start failed:\n%s", list)
	}
	if err := w.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after a failed start = %v, want nil", err)
	}
}

// Two Starts at once start the worker once: the second fails as a Start
// after the first does ("already started"), and Shutdown leaves none of
// the worker's parts behind (no pattern subscription, no roster entry).
// The queue Redis answers nothing for a moment, so that each Start is
// under way (its roster's first beat waits) when the other one begins.
func TestConcurrentStartsStartTheWorkerOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cfg := e.Config(t, `  - name: r
    schedule: "@every 1m"
    concurrency: replace
    exec: {command: ["true"]}
`)
	w := New(cfg, e.Opt, e.Locks, newFakeExec(nil), WithReplica("twice"), WithLogger(worktest.Logger(t)))
	if err := e.Srv.Pause(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- w.Start() }()
	}
	// both Starts get under way while the server is paused; the test
	// holds whether or not they overlap, which the pause makes likely
	time.Sleep(300 * time.Millisecond)
	if err := e.Srv.Resume(); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range 2 {
		if err := <-errs; err != nil {
			failed++
			if !strings.Contains(err.Error(), "already started") {
				t.Errorf("Start = %v, want already started", err)
			}
		}
	}
	if failed != 1 {
		t.Errorf("%d of two concurrent Starts failed, want 1: the worker started twice", failed)
	}
	sctx, cancel := context.WithTimeout(ctx, worktest.Wait)
	defer cancel()
	if err := w.Shutdown(sctx); err != nil {
		t.Errorf("Shutdown = %v", err)
	}
	if n := e.RDB.PubSubNumPat(ctx).Val(); n != 0 {
		t.Errorf("after Shutdown %d pattern subscriptions are left (a second replace subscription nobody stops)", n)
	}
	members, _ := roster.Read(ctx, e.RDB, cfg.Namespace)
	for _, m := range members {
		if m.ID == "twice" {
			t.Errorf("after Shutdown the replica is still in the roster (a second heartbeat nobody stops)")
		}
	}
}
