package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/runcgroup"
	"github.com/batonhq/baton/jobs"
)

// exCtx is a context bounded by 30s.
func exCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// exExecutor is an Executor whose supervisors are this test binary (TestMain
// calls supervisor.MaybeRun).
func exExecutor(opts ...executor.Option) *executor.Executor {
	return executor.New(append([]executor.Option{executor.WithSupervisorPath(os.Args[0])}, opts...)...)
}

// exRun is the run every test executes.
func exRun(job string) jobs.Run {
	return jobs.Run{
		Job:     job,
		Tick:    time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		RunID:   "run-1",
		Attempt: 2,
		Fence:   42,
		Replica: "replica-a",
	}
}

// validity is a lease stand-in: a deadline the test moves, and Done closed
// by end.
type validity struct {
	mu       sync.Mutex
	deadline time.Time
	done     chan struct{}
	once     sync.Once
}

func newValidity(d time.Duration) *validity {
	return &validity{deadline: time.Now().Add(d), done: make(chan struct{})}
}

func (v *validity) Deadline() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.deadline
}

func (v *validity) Done() <-chan struct{} { return v.done }

func (v *validity) extend(d time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.deadline = time.Now().Add(d)
}

func (v *validity) end() { v.once.Do(func() { close(v.done) }) }

func handlerJob(name string, payload string) *config.Job {
	j := &config.Job{Name: "h", Handler: &config.HandlerSpec{Name: name}}
	if payload != "" {
		j.Handler.Payload = json.RawMessage(payload)
	}
	return j
}

func TestExecuteHandler(t *testing.T) {
	reg := jobs.NewRegistry()
	var got jobs.Run
	if err := reg.HandleFunc("report.daily", func(ctx context.Context, run jobs.Run) error {
		got = run
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := reg.HandleFunc("fails", func(context.Context, jobs.Run) error { return boom }); err != nil {
		t.Fatal(err)
	}
	if err := reg.HandleFunc("panics", func(context.Context, jobs.Run) error { panic("oops") }); err != nil {
		t.Fatal(err)
	}
	if err := reg.HandleFunc("waits", func(ctx context.Context, _ jobs.Run) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}); err != nil {
		t.Fatal(err)
	}
	e := exExecutor(executor.WithHandlers(reg))
	ctx := exCtx(t)

	run := exRun("h")
	if _, err := e.Execute(ctx, handlerJob("report.daily", `{"a":1}`), run, nil); err != nil {
		t.Fatal(err)
	}
	want := run
	want.Payload = json.RawMessage(`{"a":1}`)
	if got.RunID != want.RunID || got.Fence != want.Fence || string(got.Payload) != string(want.Payload) {
		t.Errorf("handler got %+v, want %+v", got, want)
	}

	if _, err := e.Execute(ctx, handlerJob("nope", ""), run, nil); !errors.Is(err, executor.ErrUnknownHandler) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown handler: %v", err)
	}
	if _, err := exExecutor().Execute(ctx, handlerJob("report.daily", ""), run, nil); !errors.Is(err, executor.ErrUnknownHandler) {
		t.Errorf("no registry: %v", err)
	}
	if _, err := e.Execute(ctx, handlerJob("fails", ""), run, nil); !errors.Is(err, boom) {
		t.Errorf("failing handler: %v", err)
	}
	if _, err := e.Execute(ctx, handlerJob("panics", ""), run, nil); err == nil || !strings.Contains(err.Error(), "oops") {
		t.Errorf("panicking handler: %v", err)
	}
	j := handlerJob("waits", "")
	j.Timeout = 50 * time.Millisecond
	res, err := e.Execute(ctx, j, run, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout: %v", err)
	}
	if res.Duration < j.Timeout {
		t.Errorf("Duration %v, shorter than the timeout", res.Duration)
	}
}

func TestExecuteNothing(t *testing.T) {
	if _, err := exExecutor().Execute(exCtx(t), &config.Job{Name: "empty"}, exRun("empty"), nil); err == nil {
		t.Error("a job without exec, http or handler ran")
	}
}

// records is a slog.Handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

// matching returns the records whose message holds s.
func (r *records) matching(s string) []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []slog.Record
	for _, rec := range r.recs {
		if strings.Contains(rec.Message, s) {
			out = append(out, rec)
		}
	}
	return out
}

// Where runs can get no cgroup (a directory given that is no cgroup v2,
// or none wanted; anywhere but Linux), they run all the same, and the executor says once, when
// it is made, what then escapes: at WARN when a directory was given.
func TestExecWithoutCgroupsLogsWhatEscapesOnce(t *testing.T) {
	for _, tc := range []struct {
		dir   string
		level slog.Level
	}{
		{t.TempDir(), slog.LevelWarn},
		{runcgroup.Off, slog.LevelInfo},
	} {
		logs := &records{}
		e := exExecutor(executor.WithCgroups(tc.dir), executor.WithLogger(slog.New(logs)))
		for range 2 {
			if runtime.GOOS != "linux" {
				break // exec jobs need the Linux supervisor
			}
			if res, err := e.Execute(exCtx(t), execJob(t, `echo ran`), exRun("cmd"), nil); err != nil || string(res.Output) != "ran\n" {
				t.Fatalf("%s: Execute = %+v, %v", tc.dir, res, err)
			}
		}
		lines := logs.matching("no cgroup")
		if len(lines) != 1 {
			t.Fatalf("%s: %d lines say there is no cgroup; want 1", tc.dir, len(lines))
		}
		msg := lines[0].Message
		for _, what := range []string{"process group", "environment", "BATON_TREE", "outlives"} {
			if !strings.Contains(msg, what) {
				t.Errorf("%s: the line %q does not name %q", tc.dir, msg, what)
			}
		}
		if lines[0].Level != tc.level {
			t.Errorf("%s: logged at %v; want %v", tc.dir, lines[0].Level, tc.level)
		}
	}
}
