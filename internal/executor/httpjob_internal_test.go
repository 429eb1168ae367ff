package executor

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/jobs"
)

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
	run := jobs.Run{Job: "ping", Tick: time.Unix(1700000000, 0).UTC(), RunID: "0123456789abcdef0123456789abcdef", Attempt: 1, Fence: 42, Replica: "r1"}
	if _, err := New(WithHTTPClient(srv.Client())).Execute(context.Background(), job, run, nil); err != nil {
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

// An executor keeps its defaults: output limit DefaultOutputLimit, a
// (discarding) logger also when WithLogger(nil) is given, an http client;
// a negative output limit keeps none.
func TestExecutorOptionDefaults(t *testing.T) {
	if e := New(WithLogger(nil)); e.outputLimit != DefaultOutputLimit || e.log == nil || e.client == nil {
		t.Errorf("executor: limit %d, log nil %v, client nil %v", e.outputLimit, e.log == nil, e.client == nil)
	}
	if e := New(WithOutputLimit(-5)); e.outputLimit != 0 {
		t.Errorf("executor: limit %d after WithOutputLimit(-5)", e.outputLimit)
	}
}
