package otlpenv

import (
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want envConfig
		err  string
	}{
		{name: "no OTEL_ variables: off"},
		{name: "an endpoint: OTLP over HTTP", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
			want: envConfig{On: true, Protocol: "http/protobuf"}},
		{name: "a traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"},
			want: envConfig{On: true, Protocol: "http/protobuf"}},
		{name: "exporter otlp, the default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"},
			want: envConfig{On: true, Protocol: "http/protobuf"}},
		{name: "exporter none wins over an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "SDK disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
			want: envConfig{On: true, Protocol: "grpc"}},
		{name: "the traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, want: envConfig{On: true, Protocol: "http/protobuf"}},
		{name: "another exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: `OTEL_TRACES_EXPORTER="zipkin"`},
		{name: "another protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			err: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="http/json"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := configFromEnv(func(k string) string { return tc.env[k] })
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one naming %s", err, tc.err)
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case got != tc.want:
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// clearOTEL unsets every OTEL_ variable of the test's environment for the
// test.
func clearOTEL(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
		}
	}
}

// With no OTEL_ variable set, FromEnv builds no provider and no exporter:
// tracing is off.
func TestNoExporterWithoutOTELVariables(t *testing.T) {
	clearOTEL(t)
	tp, shutdown, err := FromEnv(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if tp != nil {
		t.Errorf("provider %T built with no OTEL_ variable set", tp)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// OTEL_EXPORTER_OTLP_HEADERS carries the collector's credentials. A value
// written with a colon ("Authorization: Bearer ...", as in HTTP) or with a
// stray percent sign does not parse; whatever is said about it on the
// process's stderr must not hold the credential.
func TestAMalformedOTLPHeaderKeepsItsSecretOutOfStderr(t *testing.T) {
	clearOTEL(t)
	const secret = "s3cr3t-collector-token"
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup2(int(w.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Authorization: Bearer " + secret, "Authorization=Bearer%zz" + secret} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", h)
		tp, shutdown, err := FromEnv(context.Background(), "test")
		if err == nil {
			_ = shutdown(context.Background())
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("FromEnv's error holds the header's secret: %v", err)
		}
		_ = tp
	}
	_ = syscall.Dup2(saved, 2)
	_ = syscall.Close(saved)
	_ = w.Close()
	out, _ := io.ReadAll(r)
	_ = r.Close()
	if strings.Contains(string(out), secret) {
		t.Errorf("stderr holds the OTLP header's secret:\n%s", out)
	}
}
