package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// httpGet fetches url and returns the status and body (status 0 when the
// request failed).
func httpGet(url string) (int, string) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitRunning polls cond (see poll.Until) for at most timeout while the
// processes run; it fails with their logs if one exits or the time is up.
func waitRunning(t *testing.T, timeout time.Duration, what string, cond func() bool, ps ...*proc) {
	t.Helper()
	var exited *proc
	ok := poll.Until(timeout, func() bool {
		if cond() {
			return true
		}
		for _, p := range ps {
			select {
			case <-p.done:
				exited = p
				return true
			default:
			}
		}
		return false
	})
	if exited != nil {
		t.Fatalf("baton %v exited %d while waiting for %s; stderr:\n%s", exited.cmd.Args[1:], exited.code, what, exited.stderr.String())
	}
	if !ok {
		for _, p := range ps {
			t.Logf("baton %v stderr:\n%s", p.cmd.Args[1:], p.stderr.String())
		}
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// listenRE finds the HTTP address in the "http listening" log line, JSON or
// console.
var listenRE = regexp.MustCompile(`"addr":"([^"]+)"[^\n]*"message":"http listening"|http listening addr=(\S+)`)

// listenAddr waits for p to log the address its HTTP server listens on (so
// tests can use port 0 and never race for a free port).
func listenAddr(t *testing.T, p *proc) string {
	t.Helper()
	var addr string
	waitRunning(t, 15*time.Second, "the HTTP listener", func() bool {
		m := listenRE.FindStringSubmatch(p.stderr.String())
		if m != nil {
			addr = m[1] + m[2]
		}
		return m != nil
	}, p)
	return addr
}

// tickLine is one line an exec job wrote: "job tick fence replica".
type tickLine struct {
	job, tick, replica string
	fence              int64
}

// readTicks parses the lines of path written by tickCommand.
func readTicks(t *testing.T, path string) []tickLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []tickLine
	for l := range strings.Lines(string(b)) {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue // a line being written
		}
		fence, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			t.Fatalf("bad fence in %q", l)
		}
		out = append(out, tickLine{f[0], f[1], f[3], fence})
	}
	return out
}

// tickCommand appends "$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN
// $BATON_REPLICA" to path, as one write.
func tickCommand(path string) string {
	return fmt.Sprintf(`["sh", "-c", "echo \"$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN $BATON_REPLICA\" >> %s"]`, path)
}

// checkOnce fails if a tick appears twice, and checks that execution fences
// increase with the ticks of each job.
func checkOnce(t *testing.T, lines []tickLine) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]tickLine{}
	sorted := slices.Clone(lines)
	slices.SortFunc(sorted, func(a, b tickLine) int { return strings.Compare(a.tick, b.tick) })
	for _, l := range sorted {
		id := l.job + "@" + l.tick
		if seen[id] {
			t.Errorf("tick %s ran twice: %v", id, lines)
		}
		seen[id] = true
		if prev, ok := last[l.job]; ok && l.fence <= prev.fence {
			t.Errorf("fence of %s@%s (%d) not above the previous tick's (%d)", l.job, l.tick, l.fence, prev.fence)
		}
		last[l.job] = l
	}
}

// signalAndWait sends sig and expects the process to exit with want.
func signalAndWait(t *testing.T, p *proc, sig syscall.Signal, want int) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 15*time.Second); code != want {
		t.Fatalf("exit %d after %v, want %d; stderr:\n%s", code, sig, want, p.stderr.String())
	}
}

// leftoverLeases lists lease keys still in Redis: execution leases
// (NS:lock:{exec:JOB}) and tick leases (NS:{JOB}:tick:MS holding a token
// rather than "done" or "paused").
func leftoverLeases(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	rdb := srv.TestClient(t)
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "baton:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, k := range keys {
		if strings.HasPrefix(k, "baton:lock:{") && strings.HasSuffix(k, "}") {
			left = append(left, k)
		}
		if strings.Contains(k, "}:tick:") {
			if v, err := rdb.Get(ctx, k).Result(); err == nil && v != "done" && v != "paused" {
				left = append(left, k)
			}
		}
	}
	return left
}

func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cfg := filepath.Join(dir, "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
worker:
  shutdown_grace: 5s
jobs:
  - name: every-second
    schedule: "@every 1s"
    exec:
      command: %s
`, redisURL(srv), tickCommand(out))); err != nil {
		t.Fatal(err)
	}
	// r1 takes everything from the environment, r2 from flags
	r1 := start(t, []string{"BATON_CONFIG=" + cfg, "BATON_ID=r1", "BATON_HTTP=127.0.0.1:0",
		"BATON_LOG_FORMAT=json", "BATON_LOG_LEVEL=debug"}, "run")
	r2 := start(t, nil, "run", "--config", cfg, "--id", "r2", "--log-format", "json")
	base := "http://" + listenAddr(t, r1)
	// the start line lists every route served, the API's and the queue view too
	for _, route := range []string{"GET /healthz", "GET /metrics", "GET /api/status", "POST /api/jobs/{job}/trigger", "/queues/"} {
		if !strings.Contains(r1.stderr.String(), route) {
			t.Errorf("the http start line does not list %s:\n%s", route, r1.stderr.String())
		}
	}

	waitRunning(t, 15*time.Second, "3 ticks run", func() bool { return len(readTicks(t, out)) >= 3 }, r1, r2)
	if code, body := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(base + "/readyz"); code != 200 || body != "ok\n" {
		t.Errorf("/readyz: %d %q", code, body)
	}
	code, metrics := httpGet(base + "/metrics")
	for _, want := range []string{
		`baton_scheduler_owned_total{job="every-second",replica="r1"}`, `baton_scheduler_dispatched_total{job="every-second",replica="r1"}`,
		`baton_worker_ran_total{job="every-second",replica="r1"}`, `baton_scheduler_clock_skewed{replica="r1"} 0`,
		`baton_scheduler_skew_stops_total{replica="r1"} 0`,
		"go_goroutines", "go_gc_heap_live_bytes", "process_start_time_seconds",
	} {
		if code != 200 || !strings.Contains(metrics, want) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}

	signalAndWait(t, r1, syscall.SIGTERM, 0)
	signalAndWait(t, r2, syscall.SIGTERM, 0)
	lines := readTicks(t, out)
	checkOnce(t, lines)
	for _, l := range lines {
		if l.job != "every-second" || (l.replica != "r1" && l.replica != "r2") {
			t.Errorf("unexpected line %+v", l)
		}
	}
	if left := leftoverLeases(t, srv); len(left) > 0 {
		t.Errorf("leases left after shutdown: %v", left)
	}

	// r1 logged JSON with the run's identity on its run lines
	var runLines int
	for l := range strings.Lines(r1.stderr.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON log line: %q", l)
		}
		if m["message"] == "run started" || m["message"] == "run succeeded" {
			runLines++
			for _, k := range []string{"job", "tick", "run_id", "fence", "replica"} {
				if _, ok := m[k]; !ok {
					t.Errorf("run line without %s: %q", k, l)
				}
			}
			if m["replica"] != "r1" {
				t.Errorf("r1's run line names replica %v", m["replica"])
			}
		}
	}
	if !strings.Contains(r1.stderr.String(), `"message":"baton stopped"`) {
		t.Errorf("r1 did not log its stop:\n%s", r1.stderr.String())
	}
	t.Logf("%d ticks, %d run lines on r1", len(lines), runLines)
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	started := filepath.Join(dir, "started")
	cfg := filepath.Join(dir, "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
worker:
  shutdown_grace: 1m
jobs:
  - name: slow
    schedule: "@every 1s"
    exec:
      command: ["sh", "-c", "touch %s; exec sleep 30"]
`, redisURL(srv), started)); err != nil {
		t.Fatal(err)
	}
	p := start(t, nil, "run", "--config", cfg)
	waitRunning(t, 15*time.Second, "the job to start", func() bool {
		_, err := os.Stat(started)
		return err == nil
	}, p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 5*time.Second, "the shutdown to begin", func() bool {
		return strings.Contains(p.stderr.String(), "signal received")
	})
	select {
	case <-p.done:
		t.Fatalf("exited (%d) without waiting for the running job; stderr:\n%s", p.code, p.stderr.String())
	case <-time.After(300 * time.Millisecond):
	}
	began := time.Now()
	signalAndWait(t, p, syscall.SIGTERM, exitInterrupted)
	if d := time.Since(began); d > 3*time.Second {
		t.Errorf("second signal took %v", d)
	}
	if !strings.Contains(p.stderr.String(), "second signal: exiting at once") {
		t.Errorf("no message for the second signal:\n%s", p.stderr.String())
	}
}

func TestSchedulerAndWorkerApart(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	queued, local := filepath.Join(dir, "queued"), filepath.Join(dir, "local")
	cfg := filepath.Join(dir, "baton.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
jobs:
  - name: queued
    schedule: "@every 1s"
    exec:
      command: %s
  - name: local
    schedule: "@every 1s"
    mode: local
    exec:
      command: %s
  - name: forever
    mode: singleton
    exec:
      command: ["sleep", "100"]
`, redisURL(srv), tickCommand(queued), tickCommand(local))); err != nil {
		t.Fatal(err)
	}
	s := start(t, nil, "scheduler", "--config", cfg, "--id", "s1")
	w := start(t, nil, "worker", "--config", cfg, "--id", "w1")
	waitRunning(t, 15*time.Second, "2 ticks of each job", func() bool {
		return len(readTicks(t, queued)) >= 2 && len(readTicks(t, local)) >= 2
	}, s, w)
	signalAndWait(t, s, syscall.SIGINT, 0)
	signalAndWait(t, w, syscall.SIGINT, 0)
	for path, want := range map[string]string{queued: "w1", local: "s1"} {
		lines := readTicks(t, path)
		checkOnce(t, lines)
		for _, l := range lines {
			if l.replica != want {
				t.Errorf("%s ran on %s, want %s", l.job, l.replica, want)
			}
		}
	}
	// the singleton runs on the worker, never on the scheduler-only replica
	if !strings.Contains(w.stderr.String(), "leading: singleton elected") {
		t.Errorf("the worker did not run the singleton:\n%s", w.stderr.String())
	}
	if strings.Contains(s.stderr.String(), "leading: singleton elected") {
		t.Errorf("the scheduler-only replica ran the singleton")
	}
}

func TestRunWithoutRedis(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `redis:
  url: redis://:hunter2@127.0.0.1:1/0
locking:
  fresh_deployment: true
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	began := time.Now()
	code, stderr := runBaton(t, 15*time.Second, nil, "run", "--config", cfg, "--log-format", "console")
	if code != 1 || !strings.Contains(stderr, "does not answer") || strings.Contains(stderr, "hunter2") {
		t.Errorf("exit %d, stderr:\n%s\nwant 1, the Redis named without password", code, stderr)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestDevSmoke runs before the parallel tests: the embedded server takes a
// random port, which could be one that a parallel test picked as surely
// free.
func TestDevSmoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	cfg := filepath.Join(dir, "dev.yaml")
	// redis.url is replaced by the embedded server: this one is never dialled
	if err := writeFile(cfg, fmt.Sprintf(`redis:
  url: redis://127.0.0.1:1/0
locking:
  fresh_deployment: true
  masters: ["redis://127.0.0.1:1/0"]
jobs:
  - name: tiny
    schedule: "@every 1s"
    exec:
      command: %s
`, tickCommand(out))); err != nil {
		t.Fatal(err)
	}
	p := start(t, nil, "dev", "--config", cfg, "--http", "127.0.0.1:0")
	base := "http://" + listenAddr(t, p)
	waitRunning(t, 15*time.Second, "4 ticks run", func() bool { return len(readTicks(t, out)) >= 4 }, p)
	if code, body := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(base + "/readyz"); code != 200 {
		t.Errorf("/readyz: %d %q", code, body)
	}
	code, metrics := httpGet(base + "/metrics")
	for _, id := range []string{"dev-1", "dev-2", "dev-3"} {
		if want := `baton_worker_ran_total{job="`; code != 200 || !strings.Contains(metrics, want) || !strings.Contains(metrics, `replica="`+id+`"}`) {
			t.Errorf("/metrics (%d) lacks %s", code, want)
		}
	}
	signalAndWait(t, p, syscall.SIGINT, 0)

	lines := readTicks(t, out)
	checkOnce(t, lines)
	logs := p.stderr.String()
	for _, l := range lines {
		if !strings.HasPrefix(l.replica, "dev-") {
			t.Errorf("tick %s ran on %q", l.tick, l.replica)
		}
		// the console log names who dispatched and who ran the tick
		if !strings.Contains(logs, "tick dispatched") || !strings.Contains(logs, "tick="+l.tick) {
			t.Errorf("tick %s not in the log", l.tick)
		}
	}
	for _, want := range []string{"INF", "run succeeded", "replica=dev-", "baton stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("dev log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "ERR") || strings.Contains(logs, "maxmemory-policy") {
		t.Errorf("dev log has errors or the CONFIG warning:\n%s", logs)
	}
}

func TestReadyzFollowsRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	t.Cleanup(func() { _ = srv.Resume() })
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: %s
locking:
  fresh_deployment: true
jobs:
  - name: a
    schedule: "@every 1h"
    exec: {command: ["true"]}
`, redisURL(srv)))
	p := start(t, nil, "worker", "--config", cfg, "--http", "127.0.0.1:0")
	base := "http://" + listenAddr(t, p)
	waitRunning(t, 10*time.Second, "/readyz ok", func() bool { code, _ := httpGet(base + "/readyz"); return code == 200 }, p)
	// answered from a cached check: requests cost no Redis round trip
	rdb := srv.TestClient(t)
	pings := func() int {
		info := rdb.Info(context.Background(), "commandstats").Val()
		for l := range strings.Lines(info) {
			if rest, ok := strings.CutPrefix(l, "cmdstat_ping:calls="); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				return n
			}
		}
		return 0
	}
	before := pings()
	for range 50 {
		httpGet(base + "/readyz")
	}
	if n := pings() - before; n > 10 {
		t.Errorf("50 /readyz requests sent %d PINGs", n)
	}
	// oversized headers are refused
	req, _ := http.NewRequest("GET", base+"/healthz", nil)
	req.Header.Set("X-Big", strings.Repeat("x", 64<<10))
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("64 KiB header: %d, want 431", resp.StatusCode)
		}
	}
	// a client that never finishes its headers is cut off (header timeout
	// 5s), not kept forever; in the meantime other requests are served
	slow, err := net.Dial("tcp", listenAddr(t, p))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "); err != nil {
		t.Fatal(err)
	}
	if code, _ := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz beside a slow client: %d", code)
	}
	_ = slow.SetReadDeadline(time.Now().Add(15 * time.Second))
	if n, err := slow.Read(make([]byte, 512)); !errors.Is(err, io.EOF) {
		t.Errorf("a client stuck in its headers: read %d bytes, %v; want the connection closed by the server", n, err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	var code int
	var body string
	waitRunning(t, 15*time.Second, "/readyz 503", func() bool { code, body = httpGet(base + "/readyz"); return code == 503 }, p)
	if !strings.Contains(body, "queue Redis does not answer PING") || strings.Contains(body, "127.0.0.1") {
		t.Errorf("/readyz with Redis paused: %d %q (want the reason, no address)", code, body)
	}
	if code, _ := httpGet(base + "/healthz"); code != 200 {
		t.Errorf("/healthz with Redis paused: %d", code)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, 10*time.Second, "/readyz to recover", func() bool {
		code, _ := httpGet(base + "/readyz")
		return code == 200
	}, p)
	signalAndWait(t, p, syscall.SIGTERM, 0)
}

// baton run refuses, before it connects, a list with a Go handler job (the
// binary registers none), naming the job, its line and the handler; baton
// worker alike; baton scheduler needs handlers only for local jobs.
func TestServeRefusesGoHandlerJobs(t *testing.T) {
	t.Parallel()
	path := writeConfig(t, `redis:
  url: redis://127.0.0.1:1/0
jobs:
  - name: tidy
    schedule: "@hourly"
    exec: {command: ["true"]}
  - name: vacuum
    schedule: "@hourly"
    handler: {name: vacuum-db}
`)
	for _, cmd := range []string{"run", "worker"} {
		code, out, errs := runIn(cmd, "--config", path)
		want := path + `:7: job "vacuum": handler.name: Go handler "vacuum-db" is not registered`
		if code != exitUsage || out != "" || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("baton %s: exit %d %q %q, want %d and %q", cmd, code, out, errs, exitUsage, want)
		}
	}
}

// A refusal from package baton (its errors start "baton: ") is printed after
// the command's name without the package's prefix: "baton backfill: bad
// backfill window: ...", not "baton backfill: baton: bad backfill window".
func TestUsageExitSaysTheCommandOnce(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	err := fmt.Errorf("%w: the window ends in the future", baton.ErrBackfillWindow)
	if code := usageExit("backfill", usagef("%s", err), &buf); code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if got, want := buf.String(), "baton backfill: bad backfill window: the window ends in the future\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}

// baton dev on a host where another process (another baton dev) holds the
// HTTP address says so and how to pick a free port, not only the bind error.
func TestDevHTTPAddressInUseSaysWhyAndTheWayOut(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = newHTTPServer(ln.Addr().String(), nil, slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("a second listener on one address started")
	}
	msg := noHTTPMessage(ln.Addr().String(), err)
	for _, want := range []string{ln.Addr().String() + " is in use", "another baton dev", "--http 127.0.0.1:0"} {
		if !strings.Contains(msg, want) {
			t.Errorf("warning %q does not say %q", msg, want)
		}
	}
}

// serveProbe is a unit whose Run, once its context ends (the replica's
// turn to stop), asks the HTTP server for /readyz; fail makes a Run return
// on its own.
type serveProbe struct {
	id     string
	url    string
	fail   chan error    // a Run that receives from it returns that error
	readyz chan string   // what /readyz answered when the unit stopped
	closed chan struct{} // Close called
}

func (p *serveProbe) Start(context.Context) error { return nil }
func (p *serveProbe) ID() string                  { return p.id }
func (p *serveProbe) Close()                      { close(p.closed) }
func (p *serveProbe) Run(ctx context.Context) error {
	select {
	case err := <-p.fail:
		return err
	case <-ctx.Done():
	}
	code, body := httpGet(p.url + "/readyz")
	p.readyz <- fmt.Sprintf("%d %s", code, strings.TrimSpace(body))
	return nil
}

// serve stops its parts in reverse: /readyz answers 503 "shutting down"
// before the replicas stop, and the HTTP server still answers while they
// stop; it is closed after them. A replica that stops on its own stops
// the others and the exit status is 1.
func TestServeStopsReadinessFirstReplicasThenHTTP(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	url := "http://" + addr
	a := &serveProbe{id: "a", url: url, fail: make(chan error, 1), readyz: make(chan string, 1), closed: make(chan struct{})}
	b := &serveProbe{id: "b", url: url, fail: make(chan error, 1), readyz: make(chan string, 1), closed: make(chan struct{})}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	code := make(chan int, 1)
	go func() { code <- serve([]unit{a, b}, addr, false, log, zerolog.Nop()) }()
	if !poll.Until(10*time.Second, func() bool { c, _ := httpGet(url + "/readyz"); return c == http.StatusOK }) {
		t.Fatal("/readyz never answered 200")
	}
	a.fail <- errors.New("lost its Redis for good")
	if got := <-b.readyz; got != "503 shutting down" {
		t.Errorf("/readyz while replica b stops = %q, want 503 shutting down (drained first, served until the replicas stopped)", got)
	}
	if c := <-code; c != 1 {
		t.Errorf("exit status %d after a replica stopped on its own, want 1", c)
	}
	if c, body := httpGet(url + "/readyz"); c != 0 {
		t.Errorf("/readyz after serve returned = %d %q, want no server", c, body)
	}
}

// stopProbe is a unit whose Run, once its context ends, waits (3s at
// most) for the context of peer's Run to end too, as a replica's stop
// waits for its running jobs (worker.shutdown_grace). A Run whose fail
// holds an error returns it at once, on its own; Start waits (2s at most)
// until the Runs of after returned.
type stopProbe struct {
	id       string
	fail     chan error
	ended    chan struct{} // closed when Run's context ended
	returned chan struct{} // closed when Run returned
	peer     *stopProbe
	alone    chan bool // true: peer's context did not end while this one stopped
	after    []*stopProbe
}

func newStopProbe(id string) *stopProbe {
	return &stopProbe{id: id, fail: make(chan error, 1), ended: make(chan struct{}), returned: make(chan struct{}), alone: make(chan bool, 1)}
}

func (p *stopProbe) ID() string { return p.id }
func (p *stopProbe) Close()     {}
func (p *stopProbe) Start(context.Context) error {
	for _, q := range p.after {
		select {
		case <-q.returned:
		case <-time.After(2 * time.Second):
		}
	}
	if len(p.after) > 0 {
		time.Sleep(100 * time.Millisecond) // the Run's error is handed on
	}
	return nil
}

func (p *stopProbe) Run(ctx context.Context) error {
	defer close(p.returned)
	select {
	case err := <-p.fail:
		return err
	default:
	}
	select {
	case err := <-p.fail:
		return err
	case <-ctx.Done():
	}
	close(p.ended)
	if p.peer != nil {
		select {
		case <-p.peer.ended:
			p.alone <- false
		case <-time.After(3 * time.Second):
			p.alone <- true
		}
	}
	return nil
}

// When serve stops, every replica stops claiming and running new jobs at
// once: their stops overlap. Stopped one after another, a replica would
// claim ticks and start runs (among them the tasks the replica stopped
// before it handed back to the queue) while the others drain, and baton
// dev's N replicas would take N times worker.shutdown_grace to stop.
func TestServeStopsTheReplicasTogether(t *testing.T) {
	t.Parallel()
	a, b, c := newStopProbe("a"), newStopProbe("b"), newStopProbe("c")
	b.peer = a
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	code := make(chan int, 1)
	go func() { code <- serve([]unit{a, b, c}, "", false, log, zerolog.Nop()) }()
	c.fail <- errors.New("lost its Redis for good")
	if <-b.alone {
		t.Errorf("replica a ran on (its Run's context not ended) for 3s while replica b stopped: the replicas stop one after another")
	}
	if got := <-code; got != 1 {
		t.Errorf("exit status %d after a replica stopped on its own, want 1", got)
	}
}

// Every replica that stops on its own is reported, not only the first:
// here two fail at once (baton dev's replicas share one Redis) while
// another starts; each error is logged and the exit status is 1.
func TestServeLogsEveryReplicaThatStopsOnItsOwn(t *testing.T) {
	t.Parallel()
	a, b, c := newStopProbe("a"), newStopProbe("b"), newStopProbe("c")
	c.after = []*stopProbe{a, b} // both failed before serve watches
	a.fail <- errors.New("replica a lost its Redis")
	b.fail <- errors.New("replica b lost its Redis")
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if got := serve([]unit{a, b, c}, "", false, log, zerolog.Nop()); got != 1 {
		t.Errorf("exit status %d, want 1", got)
	}
	for _, want := range []string{"replica a lost its Redis", "replica b lost its Redis"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
}
