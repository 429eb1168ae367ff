package jobs

// Review of the restructuring (7b41a71..HEAD): schedules and contracts that
// must not change with it. Self-contained: it uses only redistest and the
// package itself, no helper of the other test files.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/redistest"
)

// An http job's request carries the run's identity as the documented header
// contract (run.go, docs/scheduling.md): X-Baton-Job, X-Baton-Tick,
// X-Baton-Run-Id, X-Baton-Attempt, X-Baton-Fencing-Token, X-Baton-Replica.
// Before the restructuring the endpoint got X-Baton-Job; a header of the
// job's own by that name was overridden by the run's.
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

// WithReplicaInfo documents its defaults as "dev" and "worker" ("scheduler"
// with WithLocalOnly). Before the restructuring an empty version or role
// given to it kept those defaults (they were filled in after the options);
// the roster a replica publishes must still say so.
func TestEmptyReplicaInfoKeepsDefaults(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg, err := config.Load([]byte(fmt.Sprintf("redis: {url: \"redis://%s/0\"}\nnamespace: rvinfo\njobs:\n  - name: j\n    schedule: \"@every 1m\"\n    exec: {command: [\"true\"]}\n", srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	w := NewWorker(cfg, asynq.RedisClientOpt{Addr: srv.Addr()}, nil, nil,
		WithReplica("rv-a"), WithReplicaInfo("", ""), WithLocalOnly())
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	ms, err := ReadRoster(context.Background(), rdb, "rvinfo")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 {
		t.Fatalf("roster %+v, want one member", ms)
	}
	if ms[0].Version != "dev" || ms[0].Role != "scheduler" {
		t.Errorf("roster shows version %q role %q, want \"dev\" and \"scheduler\" (the documented defaults)", ms[0].Version, ms[0].Role)
	}
}

// every replaced time.NewTicker for heartbeats, holder-record refreshes and
// replace-request republishing: the first call comes d after the start (not
// at once), then every d, and it returns when done closes, calling nothing
// more.
func TestEveryTicksLikeATicker(t *testing.T) {
	clk := clock.NewFake(time.Unix(1700000000, 0))
	done := make(chan struct{})
	var calls atomic.Int64
	called := make(chan struct{}, 10)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		every(done, clk, time.Second, func() { calls.Add(1); called <- struct{}{} })
	}()
	if err := clk.BlockUntil(1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d calls before any time passed, want 0", n)
	}
	clk.Advance(999 * time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d calls after 999ms of a 1s period, want 0", n)
	}
	clk.Advance(time.Millisecond)
	<-called
	for i := 2; i <= 3; i++ {
		if err := clk.BlockUntil(1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		<-called
		if n := calls.Load(); n != int64(i) {
			t.Fatalf("%d calls after %ds, want %d", n, i, i)
		}
	}
	close(done)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("every did not return after done closed")
	}
	clk.Advance(10 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if n := calls.Load(); n != 3 {
		t.Errorf("%d calls after done closed, want 3", n)
	}
}

// The one Option family keeps every constructor's old defaults: replica id
// host-pid, version "dev", role "worker" ("scheduler" when local only), poll
// intervals 100ms and 1s, output limit DefaultOutputLimit, a non-nil
// (discarding) logger also when WithLogger(nil) is given, and the real
// clock also when WithClock(nil) is given.
func TestOptionDefaults(t *testing.T) {
	o := newOptions([]Option{WithLogger(nil), WithClock(nil), WithPollIntervals(0, 0), WithReplicaInfo("v9", "")})
	if o.log == nil || o.clock == nil {
		t.Fatalf("nil logger %v or clock %v", o.log == nil, o.clock == nil)
	}
	if o.taskCheck != 100*time.Millisecond || o.delayedCheck != time.Second {
		t.Errorf("poll intervals %v %v", o.taskCheck, o.delayedCheck)
	}
	if o.outputLimit != DefaultOutputLimit {
		t.Errorf("output limit %d", o.outputLimit)
	}
	if o.role != "worker" || o.version != "v9" || o.replica == "" {
		t.Errorf("role %q version %q replica %q", o.role, o.version, o.replica)
	}
	if l := newOptions([]Option{WithLocalOnly()}); l.role != "scheduler" {
		t.Errorf("local-only role %q", l.role)
	}
	d := NewDispatcher(&config.Config{}, nil, nil)
	if d.log == nil {
		t.Error("dispatcher without WithLogger has a nil logger")
	}
	if e := NewExecutor(WithOutputLimit(-5)); e.outputLimit != 0 || e.log == nil || e.client == nil {
		t.Errorf("executor: limit %d, log nil %v, client nil %v", e.outputLimit, e.log == nil, e.client == nil)
	}
}
