//go:build nootlp

package otlpenv

import (
	"context"
	"errors"
	"testing"
)

// A build without the exporters says so when the OTEL_* variables ask for
// traces, and builds nothing when they do not.
func TestABuildWithoutExportersSaysSoWhenTracesAreAskedFor(t *testing.T) {
	clearOTEL(t)
	if tp, _, err := FromEnv(context.Background(), "test"); tp != nil || err != nil {
		t.Fatalf("no OTEL_ variables: %v, %v", tp, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	if tp, _, err := FromEnv(context.Background(), "test"); tp != nil || !errors.Is(err, ErrLeftOut) {
		t.Fatalf("an endpoint: %v, %v; want ErrLeftOut", tp, err)
	}
}
