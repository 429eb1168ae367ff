package scheduler

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/tracing"
)

// Tracing (WithTracerProvider): a tick's trace starts at the claim that won
// it. The claim of a batch is one round trip for all its ticks, and only
// its answer says which ones this replica owns, so each owned tick's
// "baton.claim" span is recorded after the fact, from the moment the claim
// was sent (claimedAt) to now. Its dispatch's span is a child of it.

// traceClaims records a claim span for each owned tick of the batch and
// keeps its span context for the dispatch.
func (s *Scheduler) traceClaims(ctx context.Context, batch []item, owned []claimed, claimedAt time.Time) {
	end := trace.WithTimestamp(s.opts.clock.Now())
	for k := range owned {
		c := &owned[k]
		it := batch[c.idx]
		_, span := s.opts.tracer.Start(ctx, tracing.SpanClaim, trace.WithNewRoot(), trace.WithTimestamp(claimedAt),
			trace.WithAttributes(tracing.TickAttrs(it.job.Name, it.at, c.fence, s.opts.replica)...))
		sc := span.SpanContext()
		c.span = &sc
		span.End(end)
	}
}

// traceDispatch starts tick's "baton.dispatch" span, a child of the claim
// span in ctx, and returns ctx carrying it and the function that ends it
// with the dispatch's error.
func (s *Scheduler) traceDispatch(ctx context.Context, tick Tick) (context.Context, func(error)) {
	ctx, span := s.opts.tracer.Start(ctx, tracing.SpanDispatch, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(tracing.TickAttrs(tick.Job, tick.At, tick.Fence, tick.Replica)...),
		trace.WithAttributes(tracing.RunID.String(tick.RunID)))
	if tick.Manual {
		span.SetAttributes(tracing.Manual.Bool(true))
	}
	return ctx, func(err error) {
		switch {
		case err == nil:
		case errors.Is(err, ErrAlreadyDispatched):
			span.SetAttributes(tracing.Status.String("already dispatched"))
		case errors.Is(err, ErrJobDone):
			span.SetAttributes(tracing.Status.String("job done"))
		case errors.Is(err, ErrLeftToOthers):
			span.SetAttributes(tracing.Status.String("left to others"))
		default:
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
