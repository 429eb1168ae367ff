package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	protoHTTP = "http/protobuf" // the default, as the OTLP specification says
	protoGRPC = "grpc"
)

// Config is what the OTEL_* environment variables ask of traces.
type Config struct {
	On       bool   // export traces over OTLP
	Protocol string // "http/protobuf" or "grpc" (On only)
}

// ConfigFromEnv reads, through getenv (os.Getenv), whether traces are
// exported and how:
//
//   - OTEL_SDK_DISABLED=true: off;
//   - OTEL_TRACES_EXPORTER: "otlp" on, "none" off; unset, on when
//     OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
//     set, off otherwise (baton never exports to a default endpoint nobody
//     asked for);
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL:
//     "http/protobuf" (default) or "grpc".
//
// Any other exporter or protocol is an error naming the variable. The
// exporter reads the rest of the OTEL_EXPORTER_OTLP_* variables itself
// (endpoint, headers, timeout, certificates), the SDK the sampler
// (OTEL_TRACES_SAMPLER) and the batching (OTEL_BSP_*), the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return Config{}, nil
	}
	switch exp := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return Config{}, nil
	case "":
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return Config{}, nil
		}
	case "otlp":
	default:
		return Config{}, fmt.Errorf("tracing: OTEL_TRACES_EXPORTER=%q: baton exports traces over OTLP only (\"otlp\", or \"none\" for no traces)", exp)
	}
	name, proto := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		name, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "":
		proto = protoHTTP
	case protoHTTP, protoGRPC:
	default:
		return Config{}, fmt.Errorf("tracing: %s=%q: baton's OTLP exporter speaks %q or %q", name, proto, protoHTTP, protoGRPC)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := checkHeaders(name, env(name)); err != nil {
			return Config{}, err
		}
	}
	return Config{On: true, Protocol: proto}, nil
}

// checkHeaders checks the OTLP headers variable name's value v as the
// exporter parses it (comma-separated name=value, percent-encoded), so
// that a malformed one is refused naming the variable and the item's
// position: the exporter would log the raw value, which usually holds the
// collector's credential, and drop the header. The value is never shown.
func checkHeaders(name, v string) error {
	if v == "" {
		return nil
	}
	for i, item := range strings.Split(v, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, val, ok := strings.Cut(item, "=")
		_, kerr := url.PathUnescape(strings.TrimSpace(k))
		_, verr := url.PathUnescape(strings.TrimSpace(val))
		if !ok || strings.TrimSpace(k) == "" || kerr != nil || verr != nil {
			return fmt.Errorf("tracing: %s: item %d is not name=value with percent-encoding (\"Authorization=Bearer%%20TOKEN\"); its value is not shown", name, i+1)
		}
	}
	return nil
}

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
