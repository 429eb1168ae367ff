//go:build !nootlp

package otlpenv

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/batonhq/baton/internal/tracing"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, spans go to that collector over
// OTLP/HTTP, at the latest when the provider is shut down.
func TestExportsToTheOTLPEndpointOfTheEnvironment(t *testing.T) {
	clearOTEL(t)
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	tp, shutdown, err := FromEnv(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if tp == nil {
		t.Fatal("no provider with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	_, span := tracing.Tracer(tp).Start(context.Background(), tracing.SpanClaim)
	span.End()
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Error("no span posted to the collector's /v1/traces")
	}
}
