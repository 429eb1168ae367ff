package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/otlpenv"
)

// traceFlushTimeout bounds the flush of the spans still buffered when the
// process stops.
const traceFlushTimeout = 5 * time.Second

// tracesFromEnv builds the tracer provider the OTEL_* variables ask for
// (otlpenv.FromEnv; nil: no tracing) and returns the function that
// flushes it, to call once the replicas have stopped.
func tracesFromEnv(log *slog.Logger) (trace.TracerProvider, func(), error) {
	tp, shutdown, err := otlpenv.FromEnv(context.Background(), shortVersion())
	if errors.Is(err, otlpenv.ErrLeftOut) {
		// make dev's build: a collector variable left in the shell does
		// not stop a dev run
		log.Warn("OTEL_* variables ask for traces, but this build exports none (build tag nootlp, as make dev builds it); running without traces")
		return nil, func() {}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if tp != nil {
		log.Info("exporting traces over OTLP (OTEL_* environment variables)")
	}
	return tp, func() {
		ctx, cancel := context.WithTimeout(context.Background(), traceFlushTimeout)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("cannot flush the last traces", "err", err)
		}
	}, nil
}
