package scheduler

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/tracing"
)

// BenchmarkTickTracing is the scheduler's part of a tick after its claim
// was answered (the claim span, if traced, then the dispatch of one owned
// tick to a dispatcher that does nothing), with tracing off (no provider)
// and on (an SDK provider that samples every span and exports none): off
// must cost what it cost before tracing existed.
func BenchmarkTickTracing(b *testing.B) {
	for _, bc := range []struct {
		name string
		tp   trace.TracerProvider
	}{{"off", nil}, {"on", sdktrace.NewTracerProvider()}} {
		b.Run(bc.name, func(b *testing.B) {
			s := &Scheduler{
				disp: DispatcherFunc(func(context.Context, Tick) error { return nil }),
				sem:  make(chan struct{}, 16),
				opts: options{clock: RealClock(), leaseTTL: 5 * time.Second, replica: "r1", tracer: tracing.Tracer(bc.tp)},
			}
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			batch := []item{{job: &Job{Name: "j"}, at: at}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				owned := []claimed{{idx: 0, fence: 7, synced: true}}
				if s.opts.tracer != nil { // as process does
					s.traceClaims(ctx, batch, owned, at)
				}
				results := make(chan dispatched, 1)
				var lost []item
				s.startDispatches(ctx, batch, owned, at, results, &lost)
				if r := <-results; r.err != nil {
					b.Fatal(r.err)
				}
			}
		})
	}
}
