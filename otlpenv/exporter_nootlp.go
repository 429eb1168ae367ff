//go:build nootlp

package otlpenv

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/trace"
)

// FromEnv of a build without the exporters (the tag nootlp): with traces
// off it returns a nil provider, as the full build does; when the OTEL_*
// variables ask for traces it returns ErrLeftOut (an error in them is
// still named).
func FromEnv(ctx context.Context, version string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	none := func(context.Context) error { return nil }
	cfg, err := configFromEnv(os.Getenv)
	if err != nil || !cfg.On {
		return nil, none, err
	}
	return nil, none, ErrLeftOut
}
