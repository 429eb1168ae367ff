package baton_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/batonhttp"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/roster"
	"github.com/batonhq/baton/jobs"
)

func TestMain(m *testing.M) {
	// exec jobs run under this binary as their supervisor, as in a program
	// that embeds baton
	baton.MaybeRunSupervisor()
	goleak.VerifyTestMain(m, redistest.GoleakOptions()...)
}

// A Go program runs a handler job through the public API: two replicas of
// one config, built with baton.New and run with Run, each tick of the job
// handled once, with its payload and its run identity; the HTTP handler
// reports them ready and counts the runs; both stop cleanly when the
// context ends.
func TestGoHandlerJobEndToEnd(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: embed
worker: {shutdown_grace: 2s}
jobs:
  - name: greet
    schedule: "@every 1s"
    handler:
      name: greet
      payload: {who: world}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		run jobs.Run
		who string
	}
	runs := make(chan seen, 64)
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("greet", func(_ context.Context, run jobs.Run) error {
		var p struct{ Who string }
		if err := json.Unmarshal(run.Payload, &p); err != nil {
			return err
		}
		runs <- seen{run, p.Who}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	var replicas []*baton.Replica
	for _, id := range []string{"embed-1", "embed-2"} {
		r, err := baton.New(cfg, baton.WithHandlers(reg), baton.WithReplicaID(id))
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, r)
	}
	h := batonhttp.NewHandler(replicas...)
	defer h.Close()
	web := httptest.NewServer(h)
	defer web.Close()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, len(replicas))
	for _, r := range replicas {
		wg.Go(func() { errs <- r.Run(ctx) })
	}
	ticks := map[time.Time]string{}
	deadline := time.After(20 * time.Second)
	for len(ticks) < 4 {
		select {
		case s := <-runs:
			if prev, dup := ticks[s.run.Tick]; dup {
				t.Errorf("tick %s handled twice (by %s and %s)", s.run.Tick, prev, s.run.Replica)
			}
			ticks[s.run.Tick] = s.run.Replica
			if s.who != "world" || s.run.Job != "greet" || s.run.RunID == "" || s.run.Fence <= 0 || s.run.Attempt != 1 {
				t.Errorf("run %+v with payload %q", s.run, s.who)
			}
		case <-deadline:
			t.Fatalf("%d runs in 20s", len(ticks))
		}
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(web.URL + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var ready int
	if !poll.Until(5*time.Second, func() bool { ready, _ = get("/readyz"); return ready == 200 }) {
		t.Fatalf("/readyz: %d", ready)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `baton_worker_ran_total{job="greet",replica="embed-`) {
		t.Errorf("/metrics: %d, no run counter", code)
	}
	h.Drain()
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("/readyz after Drain: %d %q", code, body)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	}
}

// New refuses a config it cannot wire, naming what is wrong and no secret.
func TestNewBadConfig(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]byte("redis: {url: \"redis://:s3cret@127.0.0.1:1/0\"}\nlocking: {masters: [\"redis://:s3cret@127.0.0.1:1/0\"]}\njobs: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := baton.New(cfg, baton.WithRole(baton.RoleWorker))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = r.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "does not answer") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Run against a Redis that is not there: %v", err)
	}
}

// New refuses a replica that would run a handler job whose handler is not
// registered, naming each job, its line and its handler; a scheduler-only
// replica needs the handlers of local jobs only, a worker those of queued
// and singleton jobs.
func TestNewRefusesUnregisteredHandlers(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
jobs:
  - name: report
    schedule: "@hourly"
    handler: {name: report}
  - name: vacuum
    schedule: "@hourly"
    mode: local
    handler: {name: vacuum}
  - name: pump
    mode: singleton
    handler: {name: pump}
  - name: tidy
    schedule: "@hourly"
    exec: {command: ["true"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	some := jobs.NewRegistry()
	if err := some.HandleFunc("report", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Fatal(err)
	}
	all := jobs.NewRegistry()
	for _, name := range []string{"report", "vacuum", "pump"} {
		if err := all.HandleFunc(name, func(context.Context, jobs.Run) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		role    baton.Role
		reg     *jobs.Registry
		missing []string // "job@line" (the line of the job's entry)
	}{
		{"run, no registry", baton.RoleAll, nil, []string{"report@3", "vacuum@6", "pump@10"}},
		{"run, some", baton.RoleAll, some, []string{"vacuum@6", "pump@10"}},
		{"run, all", baton.RoleAll, all, nil},
		{"scheduler runs local jobs only", baton.RoleScheduler, some, []string{"vacuum@6"}},
		{"worker runs queued and singleton jobs", baton.RoleWorker, some, []string{"pump@10"}},
		{"scheduler, no registry", baton.RoleScheduler, nil, []string{"vacuum@6"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := baton.New(cfg, baton.WithRole(tc.role), baton.WithHandlers(tc.reg))
			if tc.missing == nil {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				r.Close()
				return
			}
			if err == nil {
				r.Close()
				t.Fatalf("New took a replica without the handlers of %v", tc.missing)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Fatalf("New: %T %v, want a *config.Error", err, err)
			}
			var got []string
			for _, fe := range ce.Errors {
				got = append(got, fmt.Sprintf("%s@%d", fe.Job, fe.Line))
				if want := fmt.Sprintf("Go handler %q is not registered", fe.Job); !strings.Contains(fe.Error(), want) {
					t.Errorf("%q does not say %q", fe.Error(), want)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.missing, " ") {
				t.Errorf("refused %v, want %v\n%v", got, tc.missing, err)
			}
		})
	}
}

// logBuffer collects a slog logger's lines for a test.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A Go program on a brand-new Redis (no fresh_deployment, no baton init):
// its logger gets a WARN line naming the master in its restart quarantine,
// why and until when, and the scheduler says its ticks wait for a
// quarantine, not that anything fails.
func TestBrandNewMasterQuarantineLoggedThroughProgramsLogger(t *testing.T) {
	t.Parallel()
	srv, cfg := beatOnBrandNewRedis(t, "newbie", "@every 1s")
	var logs logBuffer
	running(t, cfg, baton.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	poll.Require(t, 30*time.Second, "the quarantine and the held ticks logged", func() bool {
		s := logs.String()
		return strings.Contains(s, "in its restart quarantine until") && strings.Contains(s, "holding ticks back")
	})
	var warned, held string
	for l := range strings.Lines(logs.String()) {
		switch {
		case strings.Contains(l, "in its restart quarantine until"):
			warned = l
		case strings.Contains(l, "holding ticks back"):
			held = l
		}
	}
	for _, want := range []string{"level=WARN", "master 0 (" + srv.Addr() + ")", "no marker: a brand-new server or one restarted empty", "baton init"} {
		if !strings.Contains(warned, want) {
			t.Errorf("quarantine line does not say %q: %s", want, warned)
		}
	}
	t.Logf("%s%s", warned, held)
	if !strings.Contains(held, "lock masters in their restart quarantine (not failing): master 0 ("+srv.Addr()+") until ") || strings.Contains(held, "failing:") {
		t.Errorf("held ticks line does not say a quarantine holds them: %s", held)
	}
}

// A config file that sets locking.fresh_deployment gets a warning at every
// start: what it gives up, and what replaces it.
func TestFreshDeploymentInConfigFileWarnedAtStart(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
jobs:
  - name: beat
    schedule: "@hourly"
    exec: {command: ["true"]}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	r, err := baton.New(cfg, baton.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if s := logs.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "locking.fresh_deployment is on") || !strings.Contains(s, "restart safety is given up") || !strings.Contains(s, "baton init") {
		t.Errorf("no warning about fresh_deployment at start:\n%s", s)
	}
	// set by a program (baton dev, batontest), not by the file: no warning
	cfg, err = config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
jobs:
  - name: beat
    schedule: "@hourly"
    exec: {command: ["true"]}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Locking.FreshDeployment = true
	var quiet logBuffer
	r, err = baton.New(cfg, baton.WithLogger(slog.New(slog.NewTextHandler(&quiet, nil))))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if strings.Contains(quiet.String(), "fresh_deployment") {
		t.Errorf("warned although a program, not the file, set it:\n%s", quiet.String())
	}
}

// A Go program without a logger on a brand-new Redis: the quarantine's
// warning, naming the master, is written to stderr once, and nothing else
// (the program chose no logging).
func TestBrandNewMasterQuarantineOnStderrWithoutLogger(t *testing.T) {
	srv, cfg := beatOnBrandNewRedis(t, "nolog", "@every 1s")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr logBuffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&stderr, pr)
		close(copied)
	}()
	saved := os.Stderr
	os.Stderr = pw // baton.New takes stderr as it is now
	r, err := baton.New(cfg)
	os.Stderr = saved
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	poll.Require(t, 30*time.Second, "the quarantine warning on stderr", func() bool {
		return strings.Contains(stderr.String(), "in its restart quarantine until")
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	_ = pw.Close()
	<-copied
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "master 0 ("+srv.Addr()+")") || !strings.Contains(lines[0], "no marker") {
		t.Errorf("stderr without a logger: want one WARN line naming master 0 and why, got:\n%s", stderr.String())
	}
}

// A readiness check may run while its replica closes (the HTTP handler
// outlives the replica in a program's shutdown order): Waiting on a closed
// replica answers from what the masters last showed, without a server.
func TestWaitingOfAClosedReplica(t *testing.T) {
	t.Parallel()
	_, cfg := beatOnBrandNewRedis(t, "closed", "@hourly")
	r, err := baton.New(cfg, baton.WithReplicaID("closed-1"))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if w := r.Waiting(); w != "" {
		t.Fatalf("Waiting of a closed replica that never called a master = %q, want \"\"", w)
	}
}

// G7, "nothing half-starts": a replica whose Start fails after its worker
// started (here the singleton jobs cannot start: a valid config whose
// locking.lateness makes a 1s lock_ttl too short for the lock client) and
// that is then Closed, as Close's doc says to do with a replica that will
// not run, must leave no worker behind: no heartbeat in the roster, no
// asynq server fetching tasks. Replica.Start sets started only at its end,
// and Close shuts the worker down only when started is set.
func TestFailedStartLeavesNoWorkerRunning(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true, lateness: 600ms}
namespace: rvhalf
jobs:
  - name: tick
    schedule: "@every 1m"
    handler: {name: tick}
  - name: single
    mode: singleton
    lock_ttl: 1s
    handler: {name: single}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	for _, name := range []string{"tick", "single"} {
		if err := reg.HandleFunc(name, func(context.Context, jobs.Run) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	r, err := baton.New(cfg, baton.WithReplicaID("rv-half"), baton.WithHandlers(reg))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Start(ctx); err == nil {
		r.Close()
		t.Skip("Start succeeded: this schedule does not arise")
	} else {
		t.Logf("Start: %v", err)
	}
	r.Close()
	closed := time.Now()
	time.Sleep(5 * time.Second) // real time: two roster heartbeats (every 2s, scored by Redis TIME) a worker left running would write
	ms, err := roster.Read(ctx, rdb, "rvhalf")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.ID == "rv-half" && m.Seen.After(closed.Add(time.Second)) {
			t.Errorf("replica rv-half still beats in the roster %v after a failed Start and Close (last seen %v after Close): its worker is running", time.Since(closed).Round(time.Second), m.Seen.Sub(closed).Round(time.Millisecond))
		}
	}
}

// WithLogger's doc says "default: none"; the engines' options ignore a nil
// logger (worker.WithLogger(nil) keeps the discarding one), as the old
// per-type options did. baton.WithLogger(nil) must not crash New.
func TestNilLoggerIsNoLogger(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
jobs:
  - name: tick
    schedule: "@every 1m"
    exec: {command: ["true"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("baton.New with WithLogger(nil) panicked: %v", p)
		}
	}()
	r, err := baton.New(cfg, baton.WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

// A Go program whose config sets http.listen but that serves no handler is
// told so by a WARN line; one that mounts batonhttp.NewHandler is not.
func TestHTTPListenThatNothingServesIsWarnedAbout(t *testing.T) {
	baton.SetUnservedHTTPGrace(t, 50*time.Millisecond)
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, `http: {listen: "127.0.0.1:0"}`)
	var unserved, served logBuffer
	running(t, cfg, baton.WithReplicaID("u1"), baton.WithLogger(slog.New(slog.NewTextHandler(&unserved, nil))))
	// the handler made before Run, as a program mounts it
	r, err := baton.New(cfg, baton.WithReplicaID("s1"), baton.WithLogger(slog.New(slog.NewTextHandler(&served, nil))))
	if err != nil {
		t.Fatal(err)
	}
	serving(t, r)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	poll.Require(t, 20*time.Second, "the warning", func() bool {
		return strings.Contains(unserved.String(), "http.listen is set, but nothing serves this replica's HTTP API")
	})
	poll.Require(t, 20*time.Second, "the served replica started", func() bool { return strings.Contains(served.String(), "replica started") })
	time.Sleep(200 * time.Millisecond) // real time: a warning that must not come (4 x the grace)
	if strings.Contains(served.String(), "nothing serves") {
		t.Errorf("a replica whose handler is served warned:\n%s", served.String())
	}
}
