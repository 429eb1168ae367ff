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
// replica wrote (no "v") still reads as the tick it names, and one a newer
// replica wrote (a higher "v") is not read as this version: it is a
// NewerFormatError, which carries the tick as far as it reads, for logs.
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
	old := `{"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":7,"replica":"a","manual":false,"ns":"baton","q":"baton:default"}`
	got, err := ParsePayload([]byte(old))
	if err != nil || got.Job != tick.Job || !got.At.Equal(tick.At) || got.RunID != tick.RunID || got.Fence != tick.Fence {
		t.Errorf("%s: read as %+v, %v", old, got, err)
	}
	for _, newer := range []string{
		`{"v":3,"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":7,"replica":"a","manual":false,"later":"x"}`,
		`{"v":3,"job":"report","tick":"2026-11-28T12:00:00Z","run_id":"r1","fence":"now a string","replica":"a"}`,
	} {
		got, err := ParsePayload([]byte(newer))
		var nf *NewerFormatError
		if !errors.As(err, &nf) || nf.Version != 3 || got.Job != tick.Job || !nf.Tick.At.Equal(tick.At) {
			t.Errorf("%s: read as %+v, %v; want a NewerFormatError of version 3 naming the tick", newer, got, err)
		}
	}
}

// A chain's backfilled link carries its wait for its parents ("await":
// from its dispatch until the time given) in a payload of format 2, which
// an older worker hands back rather than run it at once, and its expiry
// covers the wait; a tick that is not backfilled, or of a job run after
// none, carries no wait and stays format 1.
func TestAWaitingBackfilledLinkIsATaskOfFormat2(t *testing.T) {
	cfg, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1"}
jobs:
  - {name: extract, schedule: "@every 1m", timeout: 1m, handler: {name: x}}
  - {name: load, after: [extract], timeout: 1m, handler: {name: x}}
`))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	until := now.Add(3 * time.Hour)
	at := now.Add(-24 * time.Hour)
	for _, tc := range []struct {
		job      string
		backfill bool
		want     int
	}{{"load", true, 2}, {"load", false, 1}, {"extract", true, 1}} {
		j, _ := cfg.Job(tc.job)
		m, err := runTaskMessage(cfg, j, scheduler.Tick{Job: tc.job, At: at, RunID: "r", Backfill: tc.backfill}, now, taskExtras{await: until})
		if err != nil {
			t.Fatal(err)
		}
		var p Payload
		if err := json.Unmarshal(m.payload, &p); err != nil {
			t.Fatal(err)
		}
		from, to := PayloadAwait(m.payload)
		switch {
		case p.V != tc.want:
			t.Errorf("%s (backfill %v): format %d, want %d", tc.job, tc.backfill, p.V, tc.want)
		case tc.want == 2 && (!from.Equal(now) || !to.Equal(until)):
			t.Errorf("%s: waits from %s until %s, want %s until %s", tc.job, from, to, now, until)
		case tc.want == 2 && p.Exp < until.Add(RunWindow(cfg, j)).UnixMilli():
			t.Errorf("%s: expires at %d, before its wait and run window end", tc.job, p.Exp)
		case tc.want == 1 && !to.IsZero():
			t.Errorf("%s (backfill %v): waits until %s, want no wait", tc.job, tc.backfill, to)
		}
		if _, err := ParsePayload(m.payload); err != nil {
			t.Errorf("%s: this release cannot read its own payload: %v", tc.job, err)
		}
	}
}

// A runtime schedule's task names the definition it was dispatched for
// ("def": VERSION-CREATED, signed with the rest); a job of the list's
// carries no such member, and a "def" that is not one is an error.
func TestTaskNamesTheScheduleDefinitionItWasDispatchedFor(t *testing.T) {
	cfg, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:1\"}\njobs: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	created := time.UnixMilli(1796290000123).UTC()
	j, err := config.DecodeSchedule(cfg, "r/1", []byte(`{"schedule":"@every 1m","handler":{"name":"report"}}`), created)
	if err != nil {
		t.Fatal(err)
	}
	j.Ref = config.ScheduleRef{Version: 3, Created: created}
	tick := scheduler.Tick{Job: j.Name, At: created.Add(time.Minute).Truncate(time.Minute), RunID: "r1", Fence: 1, Replica: "a"}
	task, err := NewRunTask(cfg, j, tick)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(task.Payload(), []byte(`"def":"3-1796290000123"`)) {
		t.Errorf("payload %s names no definition", task.Payload())
	}
	ref, err := PayloadDef(task.Payload())
	if err != nil || ref != j.Ref {
		t.Errorf("PayloadDef: %+v, %v; want %+v", ref, err, j.Ref)
	}
	list := &config.Job{Name: "report", Mode: config.ModeCron, Queue: "default"}
	task, err = NewRunTask(cfg, list, scheduler.Tick{Job: "report", At: tick.At, RunID: "r1", Fence: 1, Replica: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(task.Payload(), []byte(`"def"`)) {
		t.Errorf("a job of the list's payload %s names a definition", task.Payload())
	}
	if ref, err := PayloadDef(task.Payload()); err != nil || !ref.IsZero() {
		t.Errorf("PayloadDef of a list job's task: %+v, %v", ref, err)
	}
	for _, bad := range []string{"3", "3-", "-1", "0-5", "3-x", "03-5", "3-5-6"} {
		if _, err := PayloadDef([]byte(`{"def":"` + bad + `"}`)); err == nil {
			t.Errorf("def %q read as a definition", bad)
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
	task, err := newRunTask(cfg, job, tick, tick.At, taskExtras{trace: tracing.Inject(ctx)})
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
	plain, err := newRunTask(cfg, job, tick, tick.At, taskExtras{trace: tracing.Inject(context.Background())})
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
