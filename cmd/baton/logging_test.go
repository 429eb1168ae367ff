package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestSlogToZerolog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := newSlog(newZerolog(&buf, logFormatJSON, zerolog.InfoLevel), nil)

	log.Debug("hidden")
	log.With("replica", "r1", "job", "a").
		WithGroup("req").With("id", 7).
		Info("hello", "replica", "r2", "took", 1500*time.Millisecond, "err", errors.New("boom"),
			slog.Group("inner", "ok", true), slog.Group("empty"))
	log.With("job", "a").Warn("top", slog.Group("", "inline", 1.5), "job", "a")

	var lines []map[string]any
	for l := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("bad JSON %q: %v", l, err)
		}
		lines = append(lines, m)
		if strings.Count(l, `"job"`) > 1 {
			t.Errorf("duplicate key in %s", l)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("want 2 lines (debug filtered), got %d:\n%s", len(lines), buf.String())
	}
	first := lines[0]
	if first["level"] != "info" || first["message"] != "hello" || first["replica"] != "r1" || first["job"] != "a" {
		t.Errorf("first line %v", first)
	}
	req, _ := first["req"].(map[string]any)
	inner, _ := req["inner"].(map[string]any)
	if req["id"] != 7.0 || req["took"] != "1.5s" || req["err"] != "boom" || req["replica"] != "r2" || inner["ok"] != true {
		t.Errorf("group req = %v", req)
	}
	if _, ok := req["empty"]; ok {
		t.Errorf("empty group written: %v", req)
	}
	if second := lines[1]; second["level"] != "warn" || second["inline"] != 1.5 {
		t.Errorf("second line %v", second)
	}
}

func TestConsoleFormat(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	newSlog(newZerolog(&buf, logFormatConsole, zerolog.DebugLevel), nil).Debug("tick dispatched", "job", "a", "replica", "dev-1")
	if got := buf.String(); !strings.Contains(got, "DBG tick dispatched job=a replica=dev-1") {
		t.Errorf("console line %q", got)
	}
}
