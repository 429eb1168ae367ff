package baton_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// lines returns the JSON log lines whose msg is msg.
func (l *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// attr returns span s's attribute k ("" if it has none).
func attr(s sdktrace.ReadOnlySpan, k string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == k {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// One tick through three replicas (two schedulers racing its claim, one
// worker) is one trace: the winning claim is its root, the dispatch its
// child, and each attempt of the run (the first fails, the retry succeeds)
// a child of the dispatch, carried there by the task; every span names the
// job, the tick, the fence and the replica, and the run's log lines carry
// the trace id.
func TestOneTickIsOneTraceFromClaimToEachAttempt(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) }) // after the replicas stop

	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(3 * time.Second).Truncate(time.Second)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
worker: {shutdown_grace: 2s, poll_interval: 50ms}
jobs:
  - name: traced
    at: %q
    max_retry: 1
    retry_backoff: 0s
    handler: {name: traced}
`, srv.Addr(), at.Format(time.RFC3339)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var attempts []int
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("traced", func(_ context.Context, run jobs.Run) error {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, run.Attempt)
		if run.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	wlog := slog.New(slog.NewJSONHandler(&logs, nil))
	for _, id := range []string{"s1", "s2"} {
		replicaRun(t, cfg, baton.WithReplicaID(id), baton.WithRole(baton.RoleScheduler), baton.WithTracerProvider(tp))
	}
	replicaRun(t, cfg, baton.WithReplicaID("w1"), baton.WithRole(baton.RoleWorker), baton.WithHandlers(reg),
		baton.WithLogger(wlog), baton.WithTracerProvider(tp))

	spans := func(name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}
	poll.Require(t, 30*time.Second, "both attempts' spans", func() bool { return len(spans("baton.run")) >= 2 })
	mu.Lock()
	if fmt.Sprint(attempts) != "[1 2]" {
		t.Errorf("attempts %v, want [1 2]", attempts)
	}
	mu.Unlock()

	claims, dispatches, runs := spans("baton.claim"), spans("baton.dispatch"), spans("baton.run")
	if len(claims) != 1 || len(dispatches) != 1 || len(runs) != 2 {
		t.Fatalf("%d claim, %d dispatch, %d run spans; want 1, 1, 2", len(claims), len(dispatches), len(runs))
	}
	claim, dispatch := claims[0], dispatches[0]
	trace := claim.SpanContext().TraceID()
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != trace {
			t.Errorf("span %s (replica %s) is in trace %s, the claim's is %s", s.Name(), attr(s, "baton.replica").Emit(), s.SpanContext().TraceID(), trace)
		}
	}
	if claim.Parent().IsValid() {
		t.Errorf("the claim has a parent %s: want the trace's root", claim.Parent().SpanID())
	}
	if dispatch.Parent().SpanID() != claim.SpanContext().SpanID() {
		t.Errorf("the dispatch's parent is %s, want the claim %s", dispatch.Parent().SpanID(), claim.SpanContext().SpanID())
	}
	owner := attr(claim, "baton.replica").AsString()
	fence := attr(claim, "baton.fence").AsInt64()
	if (owner != "s1" && owner != "s2") || fence <= 0 {
		t.Errorf("claim by %q with fence %d: want s1 or s2, a fence > 0", owner, fence)
	}
	for _, s := range []sdktrace.ReadOnlySpan{claim, dispatch} {
		if attr(s, "baton.job").AsString() != "traced" || attr(s, "baton.tick").AsString() != at.UTC().Format(time.RFC3339) ||
			attr(s, "baton.fence").AsInt64() != fence || attr(s, "baton.replica").AsString() != owner {
			t.Errorf("%s attributes %v: want job traced, tick %s, fence %d, replica %s", s.Name(), s.Attributes(), at.UTC().Format(time.RFC3339), fence, owner)
		}
	}
	for _, r := range runs {
		if r.Parent().SpanID() != dispatch.SpanContext().SpanID() {
			t.Errorf("run attempt %d's parent is %s, want the dispatch %s", attr(r, "baton.attempt").AsInt64(), r.Parent().SpanID(), dispatch.SpanContext().SpanID())
		}
		if attr(r, "baton.job").AsString() != "traced" || attr(r, "baton.replica").AsString() != "w1" || attr(r, "baton.fence").AsInt64() <= 0 {
			t.Errorf("run attributes %v: want job traced, replica w1, the lease's fence", r.Attributes())
		}
		switch attr(r, "baton.attempt").AsInt64() {
		case 1:
			if r.Status().Code != codes.Error || attr(r, "baton.status").AsString() != "failed" {
				t.Errorf("attempt 1: status %v, baton.status %q: want an error, failed", r.Status(), attr(r, "baton.status").AsString())
			}
		case 2:
			if r.Status().Code == codes.Error || attr(r, "baton.status").AsString() != "ok" {
				t.Errorf("attempt 2: status %v, baton.status %q: want ok", r.Status(), attr(r, "baton.status").AsString())
			}
		default:
			t.Errorf("run span with attempt %v", attr(r, "baton.attempt").Emit())
		}
	}
	started := logs.lines(t, "run started")
	if len(started) != 2 {
		t.Fatalf("%d \"run started\" lines, want 2", len(started))
	}
	for _, l := range started {
		if l["trace_id"] != trace.String() {
			t.Errorf("run log line %v: trace_id %v, want %s", l, l["trace_id"], trace)
		}
	}
}

// A local-mode tick is one trace too: its run starts in the dispatching
// scheduler's process, as a child of the dispatch, under that replica.
func TestLocalRunIsAChildOfItsDispatch(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	srv := redistest.New(t)
	now, err := srv.TestClient(t).Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	at := now.Add(2 * time.Second).Truncate(time.Second)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
jobs:
  - name: tidy
    at: %q
    mode: local
    handler: {name: tidy}
`, srv.Addr(), at.Format(time.RFC3339)))
	if err != nil {
		t.Fatal(err)
	}
	var log runLog
	replicaRun(t, cfg, baton.WithReplicaID("s1"), baton.WithRole(baton.RoleScheduler), baton.WithHandlers(log.registry(t, "tidy")),
		baton.WithTracerProvider(tp))
	byName := func() map[string][]sdktrace.ReadOnlySpan {
		out := map[string][]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			out[s.Name()] = append(out[s.Name()], s)
		}
		return out
	}
	poll.Require(t, 20*time.Second, "the run's span", func() bool { return len(byName()["baton.run"]) > 0 })
	spans := byName()
	if len(spans["baton.claim"]) != 1 || len(spans["baton.dispatch"]) != 1 || len(spans["baton.run"]) != 1 {
		t.Fatalf("spans %v: want one claim, one dispatch, one run", spans)
	}
	claim, dispatch, run := spans["baton.claim"][0], spans["baton.dispatch"][0], spans["baton.run"][0]
	if dispatch.Parent().SpanID() != claim.SpanContext().SpanID() || run.Parent().SpanID() != dispatch.SpanContext().SpanID() ||
		run.SpanContext().TraceID() != claim.SpanContext().TraceID() {
		t.Errorf("claim %s <- dispatch %s (parent %s) <- run (parent %s): want one chain in one trace",
			claim.SpanContext().SpanID(), dispatch.SpanContext().SpanID(), dispatch.Parent().SpanID(), run.Parent().SpanID())
	}
	if attr(run, "baton.replica").AsString() != "s1" || attr(run, "baton.attempt").AsInt64() != 1 || attr(run, "baton.status").AsString() != "ok" {
		t.Errorf("run attributes %v: want replica s1, attempt 1, ok", run.Attributes())
	}
}
