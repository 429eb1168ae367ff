// Package tracing is what baton's parts share to trace a tick with
// OpenTelemetry: the span attributes, the trace context a task carries from
// its dispatch to its run, and the tracer provider the OTEL_* environment
// variables ask for (FromEnv).
//
// A tick is one trace. The replica whose claim owns the tick starts it
// ("baton.claim", the root); its dispatch ("baton.dispatch") is a child of
// the claim; the task carries the dispatch's W3C trace context, so each
// attempt of the run ("baton.run"), on whichever worker, is a child of the
// dispatch. Claims that lose the race record no span.
//
// Tracing off is a nil trace.Tracer in the parts: they skip every span,
// attribute and context, so the claim path costs nothing more than a nil
// check.
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of baton's spans.
const Name = "github.com/batonhq/baton"

// Span names.
const (
	SpanClaim    = "baton.claim"    // the claim that won a tick (the trace's root)
	SpanDispatch = "baton.dispatch" // the hand-off into the queue or a local run
	SpanRun      = "baton.run"      // one attempt of the run
)

// Attribute keys of baton's spans.
const (
	Job     = attribute.Key("baton.job")     // the job's name
	Tick    = attribute.Key("baton.tick")    // the instant the tick was due, RFC 3339 UTC
	Fence   = attribute.Key("baton.fence")   // the fencing token: the dispatch's, or the run's lease
	Replica = attribute.Key("baton.replica") // the replica that claimed, dispatched or ran
	Attempt = attribute.Key("baton.attempt") // the run's attempt, from 1
	RunID   = attribute.Key("baton.run_id")  // the dispatch's random id
	Manual  = attribute.Key("baton.manual")  // dispatched by a trigger
	Status  = attribute.Key("baton.status")  // how a run ended (jobs.Status) or why a dispatch did not count
)

// Tracer returns baton's tracer of tp, or nil (tracing off) when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(Name)
}

// TickAttrs are the attributes that name a tick on every span of its trace.
func TickAttrs(job string, at time.Time, fence int64, replica string) []attribute.KeyValue {
	return []attribute.KeyValue{
		Job.String(job),
		Tick.String(at.UTC().Format(time.RFC3339Nano)),
		Fence.Int64(fence),
		Replica.String(replica),
	}
}

var propagator = propagation.TraceContext{}

// Inject returns the W3C trace context (traceparent, tracestate) of the
// span in ctx, or nil when ctx carries none.
func Inject(ctx context.Context) map[string]string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c
}

// Extract returns ctx with the remote span context carrier names (see
// Inject) as the parent of the spans started from it; ctx as it is when
// carrier names none, or one that cannot be read.
func Extract(ctx context.Context, carrier map[string]string) context.Context {
	if len(carrier) == 0 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier(carrier))
}
