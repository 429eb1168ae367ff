//go:build !nootlp

package otlpenv

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// FromEnv builds the tracer provider the OTEL_* environment variables ask
// for (see ConfigFromEnv): an SDK provider that batches spans to an OTLP
// exporter, its resource named service.name "baton" (OTEL_SERVICE_NAME
// overrides it) with service.version version. With traces off it builds
// nothing and returns a nil provider: tracing off. shutdown flushes the
// spans still buffered and stops the exporter (bounded by its ctx); with
// tracing off it does nothing. An error names the variable that is wrong.
func FromEnv(ctx context.Context, version string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil || !cfg.On {
		return nil, none, err
	}
	var exp sdktrace.SpanExporter
	switch cfg.Protocol {
	case protoGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, none, fmt.Errorf("tracing: OTLP exporter (%s): %w", cfg.Protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "baton"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, none, fmt.Errorf("tracing: resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}
