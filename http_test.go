package baton_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/asynqmonui"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// Routes lists every route the handler serves, the queue view once it is
// served: what the binary's HTTP start line prints.
func TestRoutesListsEveryRoute(t *testing.T) {
	cfg, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:1/0\"}\njobs: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := baton.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := baton.NewHTTPHandler(r)
	defer h.Close()
	q, err := asynqmonui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ServeQueues(q)
	got := h.Routes()
	for _, want := range []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /{$}", "GET /api/status", "GET /api/locks",
		"GET /api/jobs/{job}/history", "POST /api/jobs/{job}/pause", "POST /api/jobs/{job}/resume",
		"POST /api/jobs/{job}/trigger", "POST /api/jobs/{job}/backfill", "/queues/"} {
		if !slices.Contains(got, want) {
			t.Errorf("Routes() = %v lacks %q", got, want)
		}
	}
}

// A replica whose lock master waits out its restart quarantine is ready
// (it serves the API and claims once the master votes), and /readyz says
// what it waits for: the master, why and until when, without its address.
func TestReadyzNamesAMasterInQuarantine(t *testing.T) {
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
namespace: ready
jobs:
  - name: beat
    schedule: "@every 1s"
    exec: {command: ["true"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	web := serving(t, running(t, cfg, baton.WithLogger(slog.New(slog.DiscardHandler))))
	var code int
	var body string
	poll.Require(t, 30*time.Second, "/readyz naming the quarantine", func() bool {
		resp, err := http.Get(web.URL + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		code, body = resp.StatusCode, string(b)
		return strings.Contains(body, "restart quarantine until")
	})
	if code != http.StatusOK || !strings.HasPrefix(body, "ok\n") {
		t.Errorf("/readyz during a quarantine: %d %q, want 200 ok", code, body)
	}
	if !strings.Contains(body, "lock master 0 in its restart quarantine") || !strings.Contains(body, "no marker") {
		t.Errorf("/readyz does not say which master waits and why: %q", body)
	}
	if strings.Contains(body, srv.Addr()) {
		t.Errorf("/readyz names the master's address: %q", body)
	}
}
