package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/tracing"
	"github.com/batonhq/baton/scheduler"
)

// A baton:run payload carries its format version first; a payload an older
// replica wrote (no "v") and one a newer replica wrote (a higher "v" with a
// member this one does not know) still read as the tick they name.
func TestTaskPayloadCarriesFormatVersion(t *testing.T) {
	tick := scheduler.Tick{Job: "report", At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), RunID: "r1", Fence: 7, Replica: "a"}
	p := PayloadOf(tick)
	p.Namespace, p.Queue = "baton", "baton:default"
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":7,"replica":"a","manual":false,"ns":"baton","q":"baton:default"}`
	if string(b) != want {
		t.Fatalf("payload\n got %s\nwant %s\n(a change an older replica reads differently bumps formats.TaskPayload: see docs/operating.md)", b, want)
	}
	for _, old := range []string{
		`{"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":7,"replica":"a","manual":false,"ns":"baton","q":"baton:default"}`,
		`{"v":2,"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":7,"replica":"a","manual":false,"later":"x"}`,
	} {
		got, err := ParsePayload([]byte(old))
		if err != nil || got.Job != tick.Job || !got.At.Equal(tick.At) || got.RunID != tick.RunID || got.Fence != tick.Fence {
			t.Errorf("%s: read as %+v, %v", old, got, err)
		}
	}
}

// A task dispatched under a traced span carries the span's W3C trace
// context in its payload, inside the signed body: the worker reads it back
// after verifying the signature, and a trace member changed in Redis
// breaks the signature. An untraced dispatch adds no member.
func TestTaskCarriesTheDispatchTraceContextSigned(t *testing.T) {
	cfg := &config.Config{Namespace: "baton", Security: config.SecurityConfig{SigningKeys: []string{"0123456789abcdef0123456789abcdef"}}}
	job := &config.Job{Name: "report", Queue: "default", Timeout: time.Minute}
	tick := scheduler.Tick{Job: "report", At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), RunID: "r1", Fence: 7, Replica: "a"}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	})
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	task, err := newRunTask(cfg, job, tick, tick.At, tracing.Inject(ctx))
	if err != nil {
		t.Fatal(err)
	}
	g := NewSigner(cfg.Security)
	body, err := g.Verify(DomainTask, task.Payload())
	if err != nil {
		t.Fatal(err)
	}
	if got := PayloadTrace(body)["traceparent"]; got != traceparent {
		t.Fatalf("payload %s: traceparent %q, want %q", body, got, traceparent)
	}
	if got := trace.SpanContextFromContext(tracing.Extract(context.Background(), PayloadTrace(body))); got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() {
		t.Errorf("extracted %v, want the dispatch's span %v as a remote parent", got, sc)
	}
	forged := bytes.Replace(task.Payload(), []byte("-00f067aa0ba902b7-"), []byte("-00f067aa0ba902b8-"), 1)
	if _, err := g.Verify(DomainTask, forged); !errors.Is(err, ErrBadSignature) {
		t.Errorf("a changed trace member verified: %v", err)
	}
	plain, err := newRunTask(cfg, job, tick, tick.At, tracing.Inject(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Payload(), []byte(`"trace"`)) {
		t.Errorf("untraced payload %s has a trace member", plain.Payload())
	}
}

func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		backoff time.Duration
		n       int
		want    time.Duration
	}{
		{10 * time.Millisecond, 0, 10 * time.Millisecond},
		{10 * time.Millisecond, 1, 20 * time.Millisecond},
		{10 * time.Second, 3, 80 * time.Second},
		{10 * time.Second, 100, maxRetryDelay},
		{2 * time.Hour, 5, 2 * time.Hour},
		{0, 3, 0},
	} {
		if got := BackoffDelay(tc.backoff, tc.n); got != tc.want {
			t.Errorf("backoffDelay(%s, %d) = %s, want %s", tc.backoff, tc.n, got, tc.want)
		}
	}
}
