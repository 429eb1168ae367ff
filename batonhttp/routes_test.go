package batonhttp_test

import (
	"slices"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/asynqmonui"
	"github.com/batonhq/baton/batonhttp"
	"github.com/batonhq/baton/config"
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
	h := batonhttp.NewHandler(r)
	defer h.Close()
	q, err := asynqmonui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.ServeQueues(q)
	got := h.Routes()
	for _, want := range []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /{$}", "GET /api/status", "GET /api/locks",
		"GET /api/jobs/{job}/history", "GET /api/jobs/{job}/ticks", "GET /api/ticks", "POST /api/jobs/{job}/pause", "POST /api/jobs/{job}/resume",
		"POST /api/jobs/{job}/trigger", "POST /api/jobs/{job}/backfill", "/queues/"} {
		if !slices.Contains(got, want) {
			t.Errorf("Routes() = %v lacks %q", got, want)
		}
	}
}
