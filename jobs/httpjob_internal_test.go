package jobs

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
)

// Secrets, schedule: an http job sends a ${VAR} secret in a header; the
// endpoint fails (500) and its body (e.g. a debug page echoing the request)
// carries the secret so that it straddles the 64 KiB capture limit. An
// http job's Output is the *beginning* of the body (LimitReader), so the
// capture ends with the secret's first bytes: outputTail masks whole
// secrets only, then keeps the capture's last 2 KiB, and the prefix lands
// in the history, which GET /api/jobs/J/history serves without a token.
func TestHTTPOutputTailKeepsASecretPrefix(t *testing.T) {
	const secret = "TOPSECRETvalue-0123456789abcdef"
	t.Setenv("HOOK_HTTP_TOKEN", secret)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		fill := DefaultOutputLimit - 12
		_, _ = w.Write([]byte(strings.Repeat("-", fill)))
		_, _ = w.Write([]byte(r.Header.Get("X-Token") + "\n"))
	}))
	defer srv.Close()
	e := newEnv(t)
	cfg := e.config(t, fmt.Sprintf(`  - name: hook
    schedule: "@every 1m"
    max_retry: 0
    concurrency: allow
    http:
      url: %q
      headers: {X-Token: "${HOOK_HTTP_TOKEN}"}
`, srv.URL))
	e.worker(t, cfg, NewExecutor())
	d := NewDispatcher(cfg, e.client, nil, WithQueueRedis(e.rdb))
	tk := tickOf("hook", 1)
	if err := d.Dispatch(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	e.state(t, "baton:default", tk, asynq.TaskStateArchived)
	recs := historyOf(t, e, "hook", 1, func(r []RunRecord) bool { return r[0].Status == StatusFailed })
	out := recs[0].Output
	if strings.Contains(out, secret[:12]) {
		t.Errorf("the history's output tail holds the first 12 bytes of the secret: ...%q", out[max(0, len(out)-40):])
	}
}

// An http job's request carries the run's identity as the documented header
// contract (run.go, docs/scheduling.md): X-Baton-Job, X-Baton-Tick,
// X-Baton-Run-Id, X-Baton-Attempt, X-Baton-Fencing-Token, X-Baton-Replica.
// A header of the job's own named X-Baton-Job is overridden by the run's,
// as it always was.
func TestHTTPRequestCarriesXBatonJob(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer srv.Close()
	job := &config.Job{Name: "ping", HTTP: &config.HTTPSpec{Method: "GET", URL: srv.URL,
		// a Go program building its job list by hand (no config validation)
		Headers: map[string]string{"X-Baton-Job": "spoofed"}}}
	run := Run{Job: "ping", Tick: time.Unix(1700000000, 0).UTC(), RunID: "0123456789abcdef0123456789abcdef", Attempt: 1, Fence: 42, Replica: "r1"}
	if _, err := NewExecutor(WithHTTPClient(srv.Client())).Execute(context.Background(), job, run, nil); err != nil {
		t.Fatal(err)
	}
	h := <-got
	want := map[string]string{
		"X-Baton-Job":           "ping",
		"X-Baton-Tick":          "2023-11-14T22:13:20Z",
		"X-Baton-Run-Id":        run.RunID,
		"X-Baton-Attempt":       "1",
		"X-Baton-Fencing-Token": "42",
		"X-Baton-Replica":       "r1",
	}
	for k, v := range want {
		if h.Get(k) != v {
			t.Errorf("endpoint saw %s = %q, want %q (all X-Baton headers: %v)", k, h.Get(k), v, batonHeaders(h))
		}
	}
}

func batonHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k := range h {
		if len(k) > 8 && k[:8] == "X-Baton-" {
			out[k] = h.Get(k)
		}
	}
	return out
}
