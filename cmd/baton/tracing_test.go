package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

// baton run with OTEL_EXPORTER_OTLP_ENDPOINT set exports each tick's
// claim, dispatch and run spans to that collector over OTLP/HTTP, the last
// ones flushed when it stops, and its run log lines carry the trace id.
func TestRunExportsTracesToTheOTLPEndpoint(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var posted bytes.Buffer
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			posted.Write(b)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	srv := redistest.New(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
jobs:
  - name: traced
    schedule: "@every 1s"
    exec:
      command: %s
`, redisURL(srv), tickCommand(out)))
	r1 := start(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL}, "run", "--config", cfg, "--id", "r1", "--log-format", "json")
	waitRunning(t, 15*time.Second, "2 ticks run", func() bool { return len(readTicks(t, out)) >= 2 }, r1)
	signalAndWait(t, r1, syscall.SIGTERM, 0)

	mu.Lock()
	body := posted.Bytes()
	mu.Unlock()
	for _, want := range []string{"baton.claim", "baton.dispatch", "baton.run", "baton.fence", "traced"} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("the collector received no %q (%d bytes)", want, len(body))
		}
	}
	traced := 0
	for l := range strings.Lines(r1.stderr.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", l)
		}
		if m["message"] == "run started" {
			// the span's trace id, in hex on the line, raw in the protobuf
			id, _ := m["trace_id"].(string)
			raw, err := hex.DecodeString(id)
			if err != nil || len(raw) != 16 {
				t.Errorf("run line without a trace_id: %q", l)
				continue
			}
			if bytes.Contains(body, raw) {
				traced++
			}
		}
	}
	if traced == 0 {
		t.Errorf("no run line names a trace the collector received:\n%s", r1.stderr.String())
	}
}

// An OTEL_ variable baton cannot follow stops it at start, named.
func TestRunRefusesAnOTELExporterItCannotFollow(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `redis: {url: "redis://127.0.0.1:1/0"}
locking: {fresh_deployment: true}
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	code, stderr := runBaton(t, 15*time.Second, []string{"OTEL_TRACES_EXPORTER=zipkin"}, "run", "--config", cfg, "--log-format", "console")
	if code != exitUsage || !strings.Contains(stderr, `OTEL_TRACES_EXPORTER="zipkin"`) {
		t.Errorf("exit %d, stderr:\n%s\nwant %d naming OTEL_TRACES_EXPORTER", code, stderr, exitUsage)
	}
}
