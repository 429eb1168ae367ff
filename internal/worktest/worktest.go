// Package worktest is what the tests of the job engines share: one real
// Redis with the clients a worker, a hand-off or a roster test needs, a
// config built on it, numbered ticks, and loggers a test can read. It is
// imported by tests only.
package worktest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Wait bounds every wait for an event in these tests.
const Wait = 10 * time.Second

// Env is one real Redis with the clients an engine test needs.
type Env struct {
	Srv    *redistest.Server
	Opt    asynq.RedisClientOpt
	RDB    *redis.Client
	Locks  *locking.Client
	Client *asynq.Client
	Insp   *asynq.Inspector
}

// NewEnv starts a Redis (closed at cleanup) and its clients.
func NewEnv(t testing.TB, opts ...redistest.Option) *Env {
	t.Helper()
	s := redistest.New(t, opts...)
	e := &Env{Srv: s, Opt: asynq.RedisClientOpt{Addr: s.Addr()}, RDB: s.TestClient(t)}
	locks, err := locking.New(e.RDB, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	e.Locks = locks
	e.Client = asynq.NewClient(e.Opt)
	e.Insp = asynq.NewInspector(e.Opt)
	t.Cleanup(func() {
		e.Insp.Close()
		e.Client.Close()
		locks.Close()
	})
	return e
}

// Config loads a config on e's Redis with the given job entries (YAML list
// items, indented by two spaces) and worker settings (default: a 2s grace).
func (e *Env) Config(t testing.TB, jobs string, worker ...string) *config.Config {
	t.Helper()
	y := e.YAML(jobs, worker...)
	cfg, err := config.Load([]byte(y))
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return cfg
}

// YAML is the config document Config loads.
func (e *Env) YAML(jobs string, worker ...string) string {
	w := "{shutdown_grace: 2s}"
	if len(worker) > 0 {
		w = worker[0]
	}
	return fmt.Sprintf("redis: {url: %q}\nworker: %s\njobs:\n%s", "redis://"+e.Srv.Addr()+"/0", w, jobs)
}

// State waits until the task of tick is in state want and returns its info.
func (e *Env) State(t testing.TB, queue string, tick scheduler.Tick, want asynq.TaskState) *asynq.TaskInfo {
	t.Helper()
	return e.WaitState(t, queue, tick.ID(), want)
}

// WaitState waits (at most Wait) until the task with id in queue is in
// state want and returns its info; a timeout reports the last info read.
func (e *Env) WaitState(t testing.TB, queue, id string, want asynq.TaskState) *asynq.TaskInfo {
	t.Helper()
	var info *asynq.TaskInfo
	var err error
	if !poll.Until(Wait, func() bool {
		info, err = e.Insp.GetTaskInfo(queue, id)
		return err == nil && info.State == want
	}) {
		t.Fatalf("timed out after %v waiting for task %s in state %s (last: %+v, %v)", Wait, id, want, info, err)
	}
	return info
}

// TickBase is the instant TickOf counts from: a minute before the tests
// started, so the ticks are due and young (a worker refuses a task older
// than its job's bound).
var TickBase = time.Now().UTC().Truncate(time.Second).Add(-61 * time.Second)

// TickNumber is n of TickOf's tick at.
func TickNumber(at time.Time) int { return int(at.Sub(TickBase) / time.Second) }

// TickOf is tick n of job: n seconds after TickBase, in order.
func TickOf(job string, n int) scheduler.Tick {
	return scheduler.Tick{
		Job:     job,
		At:      TickBase.Add(time.Duration(n) * time.Second),
		RunID:   fmt.Sprintf("run-%s-%d", job, n),
		Fence:   int64(1000 + n),
		Replica: "sched-1",
	}
}

// Logger writes to t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Recv returns what arrives on ch, failing t after Wait.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(Wait):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// None checks that nothing arrives on ch for d.
func None[T any](t *testing.T, ch <-chan T, d time.Duration, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %+v", what, v)
	case <-time.After(d):
	}
}

// Logs captures a logger's lines (JSON, every level) for a test to read.
type Logs struct {
	mu    sync.Mutex
	lines []map[string]any
	raw   strings.Builder
}

// Logger returns a logger writing to b.
func (b *Logs) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		var m map[string]any
		b.mu.Lock()
		defer b.mu.Unlock()
		b.raw.Write(p)
		if err := json.Unmarshal(p, &m); err == nil {
			b.lines = append(b.lines, m)
		}
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// All returns the lines so far.
func (b *Logs) All() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.lines)
}

// Count returns how many lines' messages contain msg.
func (b *Logs) Count(msg string) int {
	n := 0
	for _, l := range b.All() {
		if m, _ := l["msg"].(string); strings.Contains(m, msg) {
			n++
		}
	}
	return n
}

func (b *Logs) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.raw.String()
}
