package baton

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/batonhq/baton/internal/tracing/otlpenv"
)

// TracingFromEnv builds the OpenTelemetry tracer provider the standard
// OTEL_* environment variables ask for, to pass to WithTracerProvider:
// traces are exported over OTLP when OTEL_TRACES_EXPORTER is "otlp", or
// when it is unset and OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; OTEL_EXPORTER_OTLP_PROTOCOL
// (or ..._TRACES_PROTOCOL) picks "http/protobuf" (the default) or "grpc";
// OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn them off. The
// exporter, the sampler and the batching read the rest of their OTEL_*
// variables themselves; the resource is service.name "baton" (unless
// OTEL_SERVICE_NAME says otherwise) at service.version version.
//
// Otherwise it builds nothing: tp is nil (no tracing, at no cost). Call
// shutdown, once every replica using tp has stopped, to flush the spans
// still buffered (bounded by its ctx); it does nothing when tp is nil. An
// error names the variable that baton cannot follow. A build with the tag
// nootlp (make dev's) links no exporter: when traces are asked for, it
// returns ErrTracingLeftOut.
func TracingFromEnv(ctx context.Context, version string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	return otlpenv.FromEnv(ctx, version)
}

// ErrTracingLeftOut is TracingFromEnv's error in a build with the tag
// nootlp when the OTEL_* variables ask for traces.
var ErrTracingLeftOut = otlpenv.ErrLeftOut
