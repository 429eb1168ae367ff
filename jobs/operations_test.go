package jobs

// Adversarial review of the run history: secrets in the output tail, and
// how events fold.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
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
	t.Setenv("REVIEW_HTTP_TOKEN", secret)
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
      headers: {X-Token: "${REVIEW_HTTP_TOKEN}"}
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

// History fold, schedule: a manual trigger's "dispatched" event is written
// by the dispatcher after the enqueue returns, so a fast worker's started
// and finished events can land first. The record must still end "ok".
func TestHistoryDispatchedAfterFinished(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: m
    schedule: "@every 1m"
    concurrency: allow
    exec: {command: ["true"]}
`)
	h := &history{cfg: cfg, rdb: e.rdb, log: testLogger(t)}
	tk := tickOf("m", 1)
	tk.Manual = true
	run := Run{Job: "m", Tick: tk.At, RunID: tk.RunID, Attempt: 1, Fence: 9, Replica: "w1"}
	job, _ := cfg.Job("m")
	ctx := context.Background()
	h.started(ctx, tk, run)
	h.finished(ctx, tk, run, StatusOK, job, Result{ExitCode: 0}, "", "")
	h.dispatched(ctx, tk)
	recs, err := ReadHistory(ctx, e.rdb, cfg.Namespace, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != StatusOK || !recs[0].Manual {
		t.Errorf("records: %+v", recs)
	}
}

// History fold, schedule: attempt 1 fails, attempt 2 starts, its worker
// dies (no finished event). The record says "running", attempt 2, with the
// failure of attempt 1 cleared.
func TestHistoryRetryThenDeath(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: r
    schedule: "@every 1m"
    concurrency: allow
    exec: {command: ["true"]}
`)
	h := &history{cfg: cfg, rdb: e.rdb, log: testLogger(t)}
	tk := tickOf("r", 1)
	job, _ := cfg.Job("r")
	ctx := context.Background()
	r1 := Run{Job: "r", Tick: tk.At, RunID: tk.RunID, Attempt: 1, Fence: 9, Replica: "w1"}
	h.started(ctx, tk, r1)
	h.finished(ctx, tk, r1, StatusFailed, job, Result{ExitCode: 3}, "exit 3", "boom")
	r2 := r1
	r2.Attempt, r2.Replica, r2.Fence = 2, "w2", 10
	h.started(ctx, tk, r2)
	recs, err := ReadHistory(ctx, e.rdb, cfg.Namespace, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != StatusRunning || recs[0].Attempt != 2 || recs[0].Worker != "w2" || recs[0].Reason != "" || recs[0].ExitCode != nil {
		t.Errorf("records: %+v", recs)
	}
}
