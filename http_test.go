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
		"GET /api/jobs/{job}/history", "GET /api/jobs/{job}/ticks", "GET /api/ticks", "POST /api/jobs/{job}/pause", "POST /api/jobs/{job}/resume",
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

// The handler answers only its own names: a page whose DNS name was
// rebound to baton's address (Host and Origin evil.example, the browser
// sending them as same-origin) reads and changes nothing, even with the
// token, while the configured names (and *.NAME for a wildcard), IP
// addresses and localhost pass; probes answer whatever the Host.
func TestHTTPAnswersOnlyItsOwnNames(t *testing.T) {
	web := apiServerHTTP(t, redistest.New(t), fmt.Sprintf(`{token: %q, hosts: [baton.example, "*.ops.example"]}`, apiToken))
	port := web.URL[strings.LastIndexByte(web.URL, ':'):]
	do := func(method, host, origin, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, web.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
			req.Header.Set("Sec-Fetch-Site", "same-origin") // what a browser says of a rebound page's own requests
		}
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{"evil.example", "evil.example" + port, "ops.example", "baton.example.evil.example",
		"localhost.evil.example", "127.0.0.1.evil.example", "xbaton.example"} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/api/status"}, {"GET", "/api/jobs/report/history"}, {"GET", "/api/locks"}, {"GET", "/"},
			{"GET", "/metrics"}, {"GET", "/queues/"}, {"POST", "/api/jobs/report/pause"}, {"GET", "/healthz/../api/status"},
		} {
			code, body := do(c.method, host, "http://"+host, c.path)
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "add the name to http.hosts") {
				t.Errorf("%s %s with Host %s: %d %.200s, want 421 naming http.hosts", c.method, c.path, host, code, body)
			}
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := do("GET", "evil.example", "", path); code == http.StatusMisdirectedRequest {
			t.Errorf("probe %s with a foreign Host: %d %s, want it answered", path, code, body)
		}
	}
	for _, host := range []string{"baton.example", "baton.example" + port, "BATON.Example.", "a.ops.example" + port, "b.a.ops.example",
		"127.0.0.1" + port, "[::1]" + port, "localhost" + port, "dash.localhost" + port} {
		if code, body := do("GET", host, "http://"+host, "/api/status"); code != 200 || !strings.Contains(body, `"jobs"`) {
			t.Errorf("GET /api/status with Host %s: %d %.200s, want 200", host, code, body)
		}
	}
	// a change from the page of a configured name passes (same origin)
	if code, body := do("POST", "baton.example"+port, "http://baton.example"+port, "/api/jobs/report/pause"); code != 200 {
		t.Errorf("pause with Host and Origin baton.example: %d %s", code, body)
	}
}
