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

// FromEnv builds the tracer provider the standard OTEL_* environment
// variables ask for, to pass to baton.WithTracerProvider: traces are
// exported over OTLP when OTEL_TRACES_EXPORTER is "otlp", or when it is
// unset and OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; OTEL_EXPORTER_OTLP_PROTOCOL
// (or ..._TRACES_PROTOCOL) picks "http/protobuf" (the default) or "grpc";
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn them off. The
// exporter, the sampler and the batching read the rest of their OTEL_*
// variables themselves; the resource is service.name "baton" (unless
// OTEL_SERVICE_NAME says otherwise) at service.version version.
//
// Otherwise it builds nothing: tp is nil (no tracing, at no cost). Call
// shutdown, once every replica using tp has stopped, to flush the spans
// still buffered and stop the exporter (bounded by its ctx); it does
// nothing when tp is nil. An error names the variable that baton cannot
// follow. A build with the tag nootlp links no exporter: when traces are
// asked for, it returns ErrLeftOut.
func FromEnv(ctx context.Context, version string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	cfg, err := configFromEnv(os.Getenv)
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
		return nil, none, fmt.Errorf("otlpenv: OTLP exporter (%s): %w", cfg.Protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "baton"), attribute.String("service.version", version)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, none, fmt.Errorf("otlpenv: resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}
