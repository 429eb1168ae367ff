package worker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
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
		fill := executor.DefaultOutputLimit - 12
		_, _ = w.Write([]byte(strings.Repeat("-", fill)))
		_, _ = w.Write([]byte(r.Header.Get("X-Token") + "\n"))
	}))
	defer srv.Close()
	e := newEnv(t)
	cfg := e.Config(t, fmt.Sprintf(`  - name: hook
    schedule: "@every 1m"
    max_retry: 0
    concurrency: allow
    http:
      url: %q
      headers: {X-Token: "${HOOK_HTTP_TOKEN}"}
`, srv.URL))
	e.worker(t, cfg, executor.New())
	d := handoff.New(cfg, e.Client, nil, handoff.WithQueueRedis(e.RDB))
	tk := worktest.TickOf("hook", 1)
	if err := d.Dispatch(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	e.State(t, "baton:default", tk, asynq.TaskStateArchived)
	recs := historyOf(t, e, "hook", 1, func(r []jobs.RunRecord) bool { return r[0].Status == jobs.StatusFailed })
	out := recs[0].Output
	if strings.Contains(out, secret[:12]) {
		t.Errorf("the history's output tail holds the first 12 bytes of the secret: ...%q", out[max(0, len(out)-40):])
	}
}

// An output tail masks the job's secrets longest first (a secret that starts
// with another is masked whole) and before it cuts the output (a secret the
// cut would split is masked whole).
func TestOutputTailMasksLongestFirstBeforeTheCut(t *testing.T) {
	t.Parallel()
	job := &config.Job{Name: "j", Exec: &config.ExecSpec{Command: []string{"x"}, Env: map[string]string{
		"USER_ID": "tok1", "TOKEN": "tok1-very-secret-part", "A": "aaaa", "B": "bbbb", "C": "cccc"}}}
	for range 50 {
		if tail := outputTail([]byte("token is tok1-very-secret-part\n"), job); strings.Contains(tail, "very-secret-part") {
			t.Errorf("env masking order: tail %q", tail)
			break
		}
	}
	secret := "S3cr3t-0123456789-abcdefghijklmnopqrstuv"
	job2 := &config.Job{Name: "j", Exec: &config.ExecSpec{Command: []string{"x"}, Env: map[string]string{"TOKEN": secret}}}
	out := "the token: " + secret + strings.Repeat("-", 2048-len(secret)+1) + "\n"
	if tail := outputTail([]byte(out), job2); strings.Contains(tail, secret[1:]) {
		t.Errorf("the 2 KiB cut fell inside the secret: the tail starts %q", tail[:50])
	}
}
