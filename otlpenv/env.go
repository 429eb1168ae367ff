// Package otlpenv builds the OpenTelemetry tracer provider the standard
// OTEL_* environment variables ask for, to pass to baton.WithTracerProvider:
// an SDK provider batching spans to an OTLP exporter, over HTTP (the
// default) or gRPC. It is the only package of baton that links the SDK and
// the exporters (and through them gRPC): the baton command imports it, and
// a Go program that wants baton's traces exported as the binary exports
// them; the parts that record spans use the OpenTelemetry API alone, so a
// program that passes its own provider, or none, links no exporter. A
// build with the tag nootlp (make dev's) leaves them out: FromEnv then
// says so when traces are asked for.
//
// # Exported names
//
// [FromEnv] builds the provider; [ErrLeftOut] is its error in a build
// without the exporters.
package otlpenv

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	protoHTTP = "http/protobuf" // the default, as the OTLP specification says
	protoGRPC = "grpc"
)

// ErrLeftOut is FromEnv's error when traces are asked for of a build
// without the exporters (the build tag nootlp).
var ErrLeftOut = errors.New("otlpenv: this baton was built without the OTLP exporters (build tag nootlp, as make dev builds it): it exports no traces; build it without the tag (make build) to export them")

// envConfig is what the OTEL_* environment variables ask of traces.
type envConfig struct {
	On       bool   // export traces over OTLP
	Protocol string // "http/protobuf" or "grpc" (On only)
}

// configFromEnv reads, through getenv (os.Getenv), whether traces are
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
func configFromEnv(getenv func(string) string) (envConfig, error) {
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return envConfig{}, nil
	}
	switch exp := strings.ToLower(env("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return envConfig{}, nil
	case "":
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return envConfig{}, nil
		}
	case "otlp":
	default:
		return envConfig{}, fmt.Errorf("otlpenv: OTEL_TRACES_EXPORTER=%q: baton exports traces over OTLP only (\"otlp\", or \"none\" for no traces)", exp)
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
		return envConfig{}, fmt.Errorf("otlpenv: %s=%q: baton's OTLP exporter speaks %q or %q", name, proto, protoHTTP, protoGRPC)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		if err := checkHeaders(name, env(name)); err != nil {
			return envConfig{}, err
		}
	}
	return envConfig{On: true, Protocol: proto}, nil
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
			return fmt.Errorf("otlpenv: %s: item %d is not name=value with percent-encoding (\"Authorization=Bearer%%20TOKEN\"); its value is not shown", name, i+1)
		}
	}
	return nil
}
