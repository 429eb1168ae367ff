package worker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Buffering jobs: a tick that finds the job running is kept (at most one,
// or buffer_max), runs when the job is free, oldest first; the rest are
// dropped and recorded. Workers here are in-process, or this test binary
// re-run as a worker process and SIGKILLed (bufferWorkerEnv).

const bufferWorkerEnv = "JOBS_TEST_BUFFER_WORKER" // "addr|yaml": run a worker process

// bufferWorkerMain is the worker process: a worker of the config on the
// server at addr (concurrency 1) whose runs print "started TICK FENCE" and
// block until the process is killed.
func bufferWorkerMain(spec string) int {
	addr, y, _ := strings.Cut(spec, "|")
	cfg, err := config.Load([]byte(y))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	locks, err := locking.New(rdb, locking.WithFreshDeployment())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var mu sync.Mutex
	block := RunnerFunc(func(ctx context.Context, _ *config.Job, run jobs.Run, _ executor.Validity) (jobs.Result, error) {
		mu.Lock()
		fmt.Printf("started %s %d\n", run.Tick.Format(time.RFC3339), run.Fence)
		mu.Unlock()
		select {}
	})
	w := New(cfg, asynq.RedisClientOpt{Addr: addr}, locks, block, WithReplica("doomed"),
		WithPollIntervals(10*time.Millisecond, 20*time.Millisecond))
	if err := w.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("ready")
	select {}
}

// workerProcess starts this test binary as a worker process of cfgYAML and
// returns it with its output lines; it is killed at cleanup.
func (e *env) workerProcess(t *testing.T, cfgYAML string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), bufferWorkerEnv+"="+e.Srv.Addr()+"|"+cfgYAML)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
	})
	if l := worktest.Recv(t, lines, "the worker process ready"); l != "ready" {
		t.Fatalf("worker process said %q", l)
	}
	return cmd, lines
}

// RunnerFunc adapts a function to Runner (tests only).
type RunnerFunc func(ctx context.Context, job *config.Job, run jobs.Run, v executor.Validity) (jobs.Result, error)

func (f RunnerFunc) Execute(ctx context.Context, job *config.Job, run jobs.Run, v executor.Validity) (jobs.Result, error) {
	return f(ctx, job, run, v)
}

// kept returns the tick IDs kept in job's buffer, oldest first.
func (e *env) kept(t testing.TB, job string) []string {
	t.Helper()
	ids, err := e.RDB.ZRange(context.Background(), bufKeys(job)[0], 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func (e *env) requireKept(t testing.TB, job string, want ...scheduler.Tick) {
	t.Helper()
	ids := make([]string, len(want))
	for i, tk := range want {
		ids[i] = tk.ID()
	}
	var got []string
	if !poll.Until(worktest.Wait, func() bool {
		got = e.kept(t, job)
		return strings.Join(got, " ") == strings.Join(ids, " ")
	}) {
		t.Fatalf("kept %v after %s, want %v", got, worktest.Wait, ids)
	}
}

// statusOf waits until the history has a record of tick with status st.
func statusOf(t *testing.T, e *env, tick scheduler.Tick, st jobs.Status) jobs.RunRecord {
	t.Helper()
	var rec jobs.RunRecord
	poll.Require(t, worktest.Wait, fmt.Sprintf("%s recorded %s", tick.ID(), st), func() bool {
		recs, err := history.Read(context.Background(), e.RDB, "baton", tick.Job, 0)
		if err != nil {
			return false
		}
		for _, r := range recs {
			if r.Tick.Equal(tick.At) && r.Status == st {
				rec = r
				return true
			}
		}
		return false
	})
	return rec
}

// buffer_one across two workers: the slow run on one, the kept tick waiting
// on the other; later ticks dropped and recorded; the kept tick runs once,
// after the slow run, under a newer fence.
func TestBufferOneKeepsOneTickAcrossWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: slow
    schedule: "@every 1m"
    concurrency: buffer_one
    lock_ttl: 2s
    handler: {name: slow}
`)
	cfg.Worker.Concurrency = 1
	gate := make(chan struct{})
	exec1 := newFakeExec(blockUntil(gate))
	w1 := e.worker(t, cfg, exec1, WithReplica("w1"))
	t1, t2, t3, t4 := worktest.TickOf("slow", 1), worktest.TickOf("slow", 2), worktest.TickOf("slow", 3), worktest.TickOf("slow", 4)
	e.dispatch(t, cfg, t1)
	first := worktest.Recv(t, exec1.started, "the slow run on w1")

	cfg2 := *cfg
	cfg2.Worker.Concurrency = 3
	exec2 := newFakeExec(nil)
	w2 := e.worker(t, &cfg2, exec2, WithReplica("w2"))
	e.dispatch(t, cfg, t2)
	e.requireKept(t, "slow", t2)
	e.dispatch(t, cfg, t3)
	e.dispatch(t, cfg, t4)
	for _, tk := range []scheduler.Tick{t3, t4} {
		r := statusOf(t, e, tk, jobs.StatusDropped)
		if !strings.Contains(r.Reason, "buffer is full (1 kept)") {
			t.Errorf("%s: reason %q", tk.ID(), r.Reason)
		}
		e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	}
	worktest.None(t, exec2.started, 100*time.Millisecond, "a run while the slow one runs")

	close(gate)
	s := worktest.Recv(t, exec2.started, "the kept tick's run")
	if !s.run.Tick.Equal(t2.At) || s.run.Fence <= first.run.Fence {
		t.Errorf("kept run %+v, slow run's fence %d", s.run, first.run.Fence)
	}
	e.State(t, "baton:default", t2, asynq.TaskStateCompleted)
	worktest.None(t, exec2.started, 200*time.Millisecond, "a run of a dropped tick")
	if st := w2.Stats(); st.Dropped != 2 || st.Ran != 1 || st.Skipped != 0 {
		t.Errorf("w2 stats %+v", st)
	}
	if st := w1.Stats(); st.Ran != 1 {
		t.Errorf("w1 stats %+v", st)
	}
	if k := e.kept(t, "slow"); len(k) != 0 {
		t.Errorf("buffer after the runs: %v", k)
	}
}

// buffer_all keeps up to buffer_max ticks, runs them oldest first whatever
// order they arrived in, one at a time, and drops the rest.
func TestBufferAllRunsKeptTicksInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: batch
    schedule: "@every 1m"
    concurrency: buffer_all
    buffer_max: 3
    lock_ttl: 2s
    handler: {name: batch}
`)
	cfg.Worker.Concurrency = 8
	gate := make(chan struct{})
	var mu sync.Mutex
	running, overlaps := 0, 0
	exec := newFakeExec(func(ctx context.Context, run jobs.Run, v executor.Validity) error {
		mu.Lock()
		running++
		if running > 1 {
			overlaps++
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		if worktest.TickNumber(run.Tick) == 1 {
			return blockUntil(gate)(ctx, run, v)
		}
		time.Sleep(20 * time.Millisecond) // real time: a run that takes a moment, so that an overlapping run would show
		return nil
	})
	w := e.worker(t, cfg, exec)
	ticks := make([]scheduler.Tick, 6)
	for i := range ticks {
		ticks[i] = worktest.TickOf("batch", i+1)
	}
	e.dispatch(t, cfg, ticks[0])
	worktest.Recv(t, exec.started, "the slow run")
	// arrivals out of order: 4, 2, 3 kept (sorted by tick), 5 and 6 dropped
	e.dispatch(t, cfg, ticks[3])
	e.requireKept(t, "batch", ticks[3])
	e.dispatch(t, cfg, ticks[1])
	e.requireKept(t, "batch", ticks[1], ticks[3])
	e.dispatch(t, cfg, ticks[2])
	e.requireKept(t, "batch", ticks[1], ticks[2], ticks[3])
	e.dispatch(t, cfg, ticks[4])
	e.dispatch(t, cfg, ticks[5])
	statusOf(t, e, ticks[4], jobs.StatusDropped)
	statusOf(t, e, ticks[5], jobs.StatusDropped)

	close(gate)
	var order []int
	for range 3 {
		s := worktest.Recv(t, exec.started, "a kept tick's run")
		order = append(order, worktest.TickNumber(s.run.Tick))
	}
	if fmt.Sprint(order) != "[2 3 4]" {
		t.Errorf("kept ticks ran in the order %v, want [2 3 4]", order)
	}
	for _, tk := range ticks[:4] {
		e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
	}
	worktest.None(t, exec.started, 200*time.Millisecond, "a run of a dropped tick")
	mu.Lock()
	defer mu.Unlock()
	if overlaps != 0 {
		t.Errorf("%d runs overlapped", overlaps)
	}
	if st := w.Stats(); st.Ran != 4 || st.Dropped != 2 {
		t.Errorf("stats %+v", st)
	}
}

// A tick that finds the job free while an older tick is kept does not
// overtake it: it gives the lease back and queues behind.
func TestBufferNewTickDoesNotOvertakeKeptOnes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: job
    schedule: "@every 1m"
    concurrency: buffer_all
    buffer_max: 2
    lock_ttl: 2s
    handler: {name: job}
`)
	ctx := context.Background()
	exec := newFakeExec(nil)
	e.worker(t, cfg, exec)
	// a live waiter of tick 1 is kept, and the lease is free
	t1, t2 := worktest.TickOf("job", 1), worktest.TickOf("job", 2)
	if err := e.RDB.ZAdd(ctx, bufKeys("job")[0], redis.Z{Score: float64(t1.At.UnixMilli()), Member: t1.ID()}).Err(); err != nil {
		t.Fatal(err)
	}
	alive := time.Now().Add(time.Hour).UnixMilli()
	if err := e.RDB.HSet(ctx, bufKeys("job")[1], t1.ID(), alive).Err(); err != nil {
		t.Fatal(err)
	}
	e.dispatch(t, cfg, t2)
	e.requireKept(t, "job", t1, t2)
	worktest.None(t, exec.started, 300*time.Millisecond, "tick 2 run before the kept tick 1")
	// tick 1's waiter goes (it ran): tick 2 moves up and runs
	if err := e.RDB.ZRem(ctx, bufKeys("job")[0], t1.ID()).Err(); err != nil {
		t.Fatal(err)
	}
	if s := worktest.Recv(t, exec.started, "tick 2's run"); !s.run.Tick.Equal(t2.At) {
		t.Errorf("ran %s", s.run.Tick)
	}
	e.State(t, "baton:default", t2, asynq.TaskStateCompleted)
}

// slowWorker starts a worker whose every connection (queue and locks) goes
// through a fault-injection proxy, returned for the test to slow or cut
// with the worker's lock client; at cleanup the link is restored and the
// worker shut down.
func (e *env) slowWorker(t *testing.T, cfg *config.Config, exec executor.Runner, replica string, lockOpts ...locking.Option) (*redistest.Proxy, *locking.Client) {
	t.Helper()
	p := redistest.NewTestProxy(t, e.Srv.Addr())
	slow := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = slow.Close() })
	locks, err := locking.New(slow, append([]locking.Option{locking.WithFreshDeployment()}, lockOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	w := New(cfg, asynq.RedisClientOpt{Addr: p.Addr()}, locks, exec, WithReplica(replica),
		WithPollIntervals(10*time.Millisecond, 20*time.Millisecond), WithLogger(worktest.Logger(t)))
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdownWithin(t, w) })
	t.Cleanup(func() { _ = p.Restore() }) // shut down at full speed
	return p, locks
}

// A tick that comes in the instant between a run's end and the start of
// the kept tick it hands the job to is kept, not dropped: the kept tick is
// as good as running. The schedule: the slow run on worker A, tick 2 kept on
// worker K, whose connection is slow (300ms each way); the run ends and
// hands the lease to tick 2, and tick 3 comes in while K is still taking
// it. Tick 3 is kept and runs after tick 2 (buffer_one keeps one tick while
// one runs), under a newer fence.
func TestBufferTickBetweenARunAndTheNextIsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: slow
    schedule: "@every 1m"
    concurrency: buffer_one
    lock_ttl: 3s
    handler: {name: slow}
`)
	cfg.Worker.Concurrency = 1
	gate := make(chan struct{})
	execA := newFakeExec(blockUntil(gate))
	e.worker(t, cfg, execA, WithReplica("A"))
	t1, t2, t3 := worktest.TickOf("slow", 1), worktest.TickOf("slow", 2), worktest.TickOf("slow", 3)
	e.dispatch(t, cfg, t1)
	worktest.Recv(t, execA.started, "the slow run on A")

	execK := newFakeExec(nil)
	p, _ := e.slowWorker(t, cfg, execK, "K")
	e.dispatch(t, cfg, t2)
	e.requireKept(t, "slow", t2)
	if err := p.AddLatency(300*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}

	close(gate) // the slow run ends: the lease goes to tick 2
	poll.Require(t, worktest.Wait, "the lease handed to the kept tick 2", func() bool {
		return e.marker("slow") == t2.ID()
	})
	e.dispatch(t, cfg, t3)
	second := worktest.Recv(t, execK.started, "the kept tick 2's run")
	third := worktest.Recv(t, execA.started, "tick 3's run, kept at the hand-off")
	if !second.run.Tick.Equal(t2.At) || !third.run.Tick.Equal(t3.At) || third.run.Fence <= second.run.Fence {
		t.Errorf("ran %s (fence %d), then %s (fence %d); want tick 2, then tick 3 under a newer fence",
			second.run.Tick.Format(time.RFC3339), second.run.Fence, third.run.Tick.Format(time.RFC3339), third.run.Fence)
	}
	e.State(t, "baton:default", t3, asynq.TaskStateCompleted)
	recs, err := history.Read(context.Background(), e.RDB, "baton", "slow", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Status == jobs.StatusDropped {
			t.Errorf("%s dropped: %s", r.Tick.Format(time.RFC3339), r.Reason)
		}
	}
}

// The worker running the slow run is killed: its lease runs out at
// lock_ttl, and the kept tick, waiting on another worker, runs then, once,
// under a newer fence.
func TestBufferKeptTickRunsAfterTheRunningWorkerIsKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jobsYAML := `  - name: slow
    schedule: "@every 1m"
    concurrency: buffer_one
    lock_ttl: 1s
    handler: {name: slow}
`
	cfg := e.Config(t, jobsYAML, "{concurrency: 1, shutdown_grace: 2s}")
	y := e.YAML(jobsYAML, "{concurrency: 1, shutdown_grace: 2s}")
	proc, lines := e.workerProcess(t, y)
	t1, t2, t3 := worktest.TickOf("slow", 1), worktest.TickOf("slow", 2), worktest.TickOf("slow", 3)
	e.dispatch(t, cfg, t1)
	l := worktest.Recv(t, lines, "the slow run in the worker process")
	var fence int64
	if _, err := fmt.Sscanf(l, "started "+t1.At.Format(time.RFC3339)+" %d", &fence); err != nil {
		t.Fatalf("worker process said %q: %v", l, err)
	}

	cfg2 := e.Config(t, jobsYAML, "{concurrency: 3, shutdown_grace: 2s}")
	exec := newFakeExec(nil)
	w := e.worker(t, cfg2, exec, WithReplica("survivor"))
	e.dispatch(t, cfg, t2)
	e.requireKept(t, "slow", t2)
	e.dispatch(t, cfg, t3)
	statusOf(t, e, t3, jobs.StatusDropped)

	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s := worktest.Recv(t, exec.started, "the kept tick's run after the kill")
	if !s.run.Tick.Equal(t2.At) || s.run.Fence <= fence {
		t.Errorf("kept run %+v, killed run's fence %d", s.run, fence)
	}
	e.State(t, "baton:default", t2, asynq.TaskStateCompleted)
	if st := w.Stats(); st.Ran != 1 || st.Dropped != 1 {
		t.Errorf("stats %+v", st)
	}
}

// The worker holding a kept tick is killed while it waits: its entry stops
// being renewed and leaves the buffer after lock_ttl, so a later tick is
// kept in its place instead of dropped.
func TestBufferKilledWaiterLeavesTheBuffer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	jobsYAML := `  - name: slow
    schedule: "@every 1m"
    concurrency: buffer_one
    lock_ttl: 1s
    handler: {name: slow}
`
	cfg := e.Config(t, jobsYAML)
	ctx := context.Background()
	// a run holds the job (this test, as the running run)
	running, err := e.Locks.Lock(ctx, "exec:slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Release(ctx) }()
	y := e.YAML(jobsYAML, "{concurrency: 1, shutdown_grace: 2s}")
	proc, _ := e.workerProcess(t, y)
	t1, t2 := worktest.TickOf("slow", 1), worktest.TickOf("slow", 2)
	e.dispatch(t, cfg, t1)
	e.requireKept(t, "slow", t1) // waiting in the worker process
	if err := proc.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	exec := newFakeExec(nil)
	w := e.worker(t, cfg, exec, WithReplica("survivor"))
	// the dead waiter's entry lapses within lock_ttl of its last beat
	poll.Require(t, worktest.Wait, "the dead waiter's entry gone", func() bool {
		return e.rankOf(t, "slow", t1, time.Second) < 0
	})
	e.dispatch(t, cfg, t2)
	e.requireKept(t, "slow", t2)
	if err := running.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s := worktest.Recv(t, exec.started, "tick 2's run"); !s.run.Tick.Equal(t2.At) {
		t.Errorf("ran %s", s.run.Tick)
	}
	if st := w.Stats(); st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
}

// A forward step of the queue Redis's clock (30 s, 15 min) drops no kept
// tick for good: every waiter's entry lapses by the new clock and is
// dropped at the next buffer call, and each waiter, still waiting, puts it
// back in its place at its next renewal; the kept ticks then run, oldest
// first. (The lock masters' clock is not stepped here: it is a separate
// server.)
func TestQueueClockStepKeepsBufferedTicks(t *testing.T) {
	t.Parallel()
	for _, step := range []time.Duration{30 * time.Second, 15 * time.Minute} {
		t.Run("+"+step.String(), func(t *testing.T) {
			clock := redistest.NewTestClock(t)
			e := newEnv(t, redistest.WithClock(clock))
			locks, err := locking.New(redistest.New(t).TestClient(t), locking.WithFreshDeployment())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = locks.Close() }) // after the worker's shutdown
			e.Locks = locks
			cfg := e.Config(t, `  - name: batch
    schedule: "@every 1m"
    concurrency: buffer_all
    buffer_max: 3
    lock_ttl: 3s
    handler: {name: batch}
`)
			cfg.Worker.Concurrency = 4
			gate := make(chan struct{})
			exec := newFakeExec(func(ctx context.Context, run jobs.Run, v executor.Validity) error {
				if worktest.TickNumber(run.Tick) == 1 {
					return blockUntil(gate)(ctx, run, v)
				}
				return nil
			})
			w := e.worker(t, cfg, exec)
			ticks := []scheduler.Tick{worktest.TickOf("batch", 1), worktest.TickOf("batch", 2), worktest.TickOf("batch", 3)}
			e.dispatch(t, cfg, ticks[0])
			worktest.Recv(t, exec.started, "the slow run")
			e.dispatch(t, cfg, ticks[1])
			e.dispatch(t, cfg, ticks[2])
			e.requireKept(t, "batch", ticks[1], ticks[2])

			if err := clock.Step(step); err != nil {
				t.Fatal(err)
			}
			if rank := e.rankOf(t, "batch", ticks[1], 3*time.Second); rank >= 0 {
				t.Fatalf("tick 2 still ranks %d after a step of %v: its entry should lapse", rank, step)
			}
			e.requireKept(t, "batch", ticks[1], ticks[2]) // back at their renewals

			close(gate)
			var order []int
			for range 2 {
				order = append(order, worktest.TickNumber(worktest.Recv(t, exec.started, "a kept tick's run").run.Tick))
			}
			if fmt.Sprint(order) != "[2 3]" {
				t.Errorf("kept ticks ran in the order %v, want [2 3]", order)
			}
			for _, tk := range ticks {
				e.State(t, "baton:default", tk, asynq.TaskStateCompleted)
			}
			if st := w.Stats(); st.Ran != 3 || st.Dropped != 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// Schedules that try to make a buffer's kept ticks run out of order,
// twice, or beside another run.

// rankOf runs the buffer script's "rank" op for tick (which also drops the
// entries whose waiter stopped beating), as any worker's next call would.
func (e *env) rankOf(t *testing.T, job string, tick scheduler.Tick, ttl time.Duration) int64 {
	t.Helper()
	n, err := bufferScript.Run(context.Background(), e.RDB, bufKeys(job),
		"rank", tick.ID(), tick.At.UnixMilli(), ttl.Milliseconds(), 1).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Schedule (buffer_one, lock_ttl 1s):
//
//  1. a run holds the job (this test holds the execution lease).
//  2. tick 2 finds the job running: kept on worker B, the head of the
//     buffer, waiting in Lock.
//  3. worker B stalls past lock_ttl (here: its clock, which drives the
//     beats, stands still; a GC pause or CPU starvation does the same):
//     tick 2's entry lapses and is dropped as dead.
//  4. tick 3 finds the job running: kept on worker C (the slot is free).
//  5. worker B resumes: its beat finds the entry gone and joins again,
//     "back in line, beyond the bound if need be" (buffer.go) ... but
//     buffer.lua's join refuses a new entry in a full buffer (-1), which
//     keep ignores. Tick 2 is still waiting in Lock, now outside the
//     buffer, so no run sees it as older.
//  6. the run ends. Tick 2's and tick 3's waiters race for the lease; when
//     tick 3's wins (here B's lock client is 200ms slower), first() finds no
//     older kept tick and tick 3 runs before tick 2, which was kept first
//     and is older. (Both run: buffer_one kept two ticks, none dropped.)
func TestBufferStalledWaiterKeepsItsPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: slow
    schedule: "@every 1m"
    concurrency: buffer_one
    lock_ttl: 1s
    handler: {name: slow}
`)
	ctx := context.Background()
	running, err := e.Locks.Lock(ctx, "exec:slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Release(ctx) }()

	// worker B: its beats on a clock the test moves; its lock client a bit
	// slower than C's (a farther network), so C's waiter wins a race
	p := redistest.NewTestProxy(t, e.Srv.Addr())
	slow := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer slow.Close()
	locksB, err := locking.New(slow, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	defer locksB.Close()
	clkB := clock.NewFake(time.Now())
	execB := newFakeExec(nil)
	cfgB := *cfg
	cfgB.Worker.Concurrency = 1 // tick 2's wait takes B's one slot: tick 3 goes to C
	wB := New(&cfgB, e.Opt, locksB, execB, WithReplica("B"), WithClock(clkB),
		WithPollIntervals(10*time.Millisecond, 20*time.Millisecond), WithLogger(worktest.Logger(t)))
	if err := wB.Start(); err != nil {
		t.Fatal(err)
	}
	defer shutdownWithin(t, wB)

	t2, t3 := worktest.TickOf("slow", 2), worktest.TickOf("slow", 3)
	e.dispatch(t, cfg, t2)
	e.requireKept(t, "slow", t2)
	if err := p.AddLatency(200*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	// B stalls: no beat; the entry lapses within lock_ttl
	poll.Require(t, worktest.Wait, "tick 2's entry dropped as dead", func() bool { return e.rankOf(t, "slow", t2, time.Second) < 0 })

	gate := make(chan struct{})
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	execC := newFakeExec(blockUntil(gate))
	e.worker(t, cfg, execC, WithReplica("C"))
	e.dispatch(t, cfg, t3)
	e.requireKept(t, "slow", t3)

	// B resumes: its beat finds the entry gone and joins again; from here
	// on its clock runs with real time, so its entry stays alive however
	// slowly the rest of the test goes (a starved machine)
	clkB.Advance(time.Second)
	resumed := make(chan struct{})
	var beating sync.WaitGroup
	beating.Go(func() {
		for {
			select {
			case <-resumed:
				return
			case <-time.After(50 * time.Millisecond):
				clkB.Advance(50 * time.Millisecond)
			}
		}
	})
	defer beating.Wait()
	defer close(resumed)
	var kept []string
	poll.Until(time.Second, func() bool { kept = e.kept(t, "slow"); return len(kept) == 2 })
	t.Logf("kept after B's beat: %v", kept)

	if err := running.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var first started
	var who string
	select {
	case first = <-execB.started:
		who = "B"
	case first = <-execC.started:
		who = "C"
	case <-time.After(worktest.Wait):
		t.Fatal("no run after the job was freed")
	}
	t.Logf("first run: %s on %s", first.run.Tick.Format(time.RFC3339), who)
	if !first.run.Tick.Equal(t2.At) {
		t.Errorf("tick %s ran first, while the older kept tick %s waited (buffer: %v): kept ticks must run oldest first; "+
			"B's join after its stall was refused by the bound and ignored", first.run.Tick.Format(time.RFC3339), t2.ID(), kept)
	}
	close(gate)
	// whatever ran first, the other runs next: both kept ticks of buffer_one run
	select {
	case <-execB.started:
	case <-execC.started:
	case <-time.After(worktest.Wait):
	}
	if s := wB.Stats(); s.Dropped != 0 {
		t.Logf("B stats %+v", s)
	}
}

// shutdownWithin shuts w down within wait, failing the test on an error.
func shutdownWithin(t *testing.T, w *Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), worktest.Wait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil && !strings.Contains(err.Error(), "already shut down") {
		t.Errorf("Shutdown: %v", err)
	}
}

// forbid and replace jobs never touch a buffer: a tick that finds the job
// running is skipped (forbid) or replaces the run (replace), and no buffer
// keys appear. (Held.)
func TestBufferKeysOnlyForBufferingJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := e.Config(t, `  - name: fb
    schedule: "@every 1m"
    lock_ttl: 1s
    handler: {name: fb}
  - name: rp
    schedule: "@every 1m"
    concurrency: replace
    lock_ttl: 1s
    handler: {name: rp}
`)
	gate := make(chan struct{})
	defer close(gate)
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec)
	e.dispatch(t, cfg, worktest.TickOf("fb", 1))
	worktest.Recv(t, exec.started, "fb's first run")
	e.dispatch(t, cfg, worktest.TickOf("fb", 2))
	statusOf(t, e, worktest.TickOf("fb", 2), jobs.StatusSkipped)
	e.dispatch(t, cfg, worktest.TickOf("rp", 1))
	worktest.Recv(t, exec.started, "rp's first run")
	e.dispatch(t, cfg, worktest.TickOf("rp", 2))
	if s := worktest.Recv(t, exec.started, "rp's replacing run"); !s.run.Tick.Equal(worktest.TickOf("rp", 2).At) {
		t.Errorf("replacing run %+v", s.run)
	}
	statusOf(t, e, worktest.TickOf("rp", 1), jobs.StatusReplaced)
	n, err := e.RDB.Exists(context.Background(), append(bufKeys("fb"), bufKeys("rp")...)...).Result()
	if err != nil || n != 0 {
		t.Errorf("buffer keys of forbid/replace jobs: %d (%v)", n, err)
	}
	if st := w.Stats(); st.Dropped != 0 || st.Skipped != 1 || st.Replaced != 1 {
		t.Errorf("stats %+v", st)
	}
}
