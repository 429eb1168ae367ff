package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/batonbin"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// batonBin is the baton binary built once by TestMain, as a release is
// (no build tags); devBin is built with the "dev" tag (baton dev's
// embedded Redis).
var batonBin, devBin string

// testMain runs the tests and then removes the build directory (goleak's
// VerifyTestMain calls os.Exit, so a defer in TestMain would not run).
type testMain struct {
	m   *testing.M
	dir string
}

func (t testMain) Run() int {
	defer os.RemoveAll(t.dir)
	return t.m.Run()
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "baton-cmd-test-")
	if err == nil {
		// both builds at once: each is mostly its own link, one core each
		var devErr error
		var wg sync.WaitGroup
		wg.Go(func() { devBin, devErr = batonbin.Build(dir, "dev") })
		batonBin, err = batonbin.Build(dir)
		wg.Wait()
		err = errors.Join(err, devErr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(testMain{m, dir})
}

// lockedBuffer is a bytes.Buffer safe to read while a process writes to it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a running baton process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	code           int
}

// start runs the baton binary with args and extra environment; the process
// is killed and reaped in cleanup if still running.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	if len(args) > 0 && args[0] == "lock" && !slices.Contains(args, "--restart-quarantine") {
		initMasters(t, env, args[1:])
	}
	if len(args) > 0 && args[0] == "lock" {
		// the variables a test hands baton are meant for CMD
		pass := []string{"lock"}
		for _, kv := range env {
			if name, _, _ := strings.Cut(kv, "="); name != "BATON_REDIS_URL" {
				pass = append(pass, "--inherit-env", name)
			}
		}
		args = append(pass, args[1:]...)
	}
	bin := batonBin
	if len(args) > 0 && args[0] == "dev" {
		bin = devBin
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// a stray grandchild holding the output pipes must not stall Wait
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill() // CMD gets SIGKILL too (parent-death signal)
			<-p.done
		}
	})
	return p
}

// initMasters marks the lock masters of a "baton lock" command line (its
// --redis, --prefix and --redis-password-file, or its --config, else
// $BATON_REDIS_URL of env) with baton init, as a first deployment does:
// every test's Redis is brand new. Masters marked already (by the test's
// earlier runs) are refused and stay as they are, as on a deployment in
// use; so do unreachable ones, which the lock run then reports.
func initMasters(t *testing.T, env []string, lockArgs []string) {
	t.Helper()
	var urls []string
	var prefix, passwordFile, config string
	for i := 0; i < len(lockArgs) && lockArgs[i] != "--"; i++ {
		name, value, inline := strings.Cut(strings.TrimLeft(lockArgs[i], "-"), "=")
		if !strings.HasPrefix(lockArgs[i], "-") {
			continue
		}
		switch name {
		case "redis", "prefix", "redis-password-file", "config":
		default:
			continue
		}
		if !inline {
			if i+1 == len(lockArgs) {
				break
			}
			i++
			value = lockArgs[i]
		}
		switch name {
		case "redis":
			urls = append(urls, value)
		case "prefix":
			prefix = value
		case "redis-password-file":
			passwordFile = value
		case "config":
			config = value
		}
	}
	args := []string{"init"}
	switch {
	case len(urls) > 0:
		for _, u := range urls {
			args = append(args, "--redis", u)
		}
		if prefix != "" {
			args = append(args, "--prefix", prefix)
		}
		if passwordFile != "" {
			args = append(args, "--redis-password-file", passwordFile)
		}
	case config != "":
		args = append(args, "--config", config)
	default:
		u := os.Getenv("BATON_REDIS_URL")
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "BATON_REDIS_URL="); ok {
				u = v
			}
		}
		if u == "" {
			return
		}
		args = append(args, "--redis", u)
		if prefix != "" {
			args = append(args, "--prefix", prefix)
		}
	}
	cmd := exec.Command(batonBin, args...)
	cmd.Env = append(os.Environ(), env...)
	_ = cmd.Run() // refused or failed: the lock run says what it finds
}

// wait waits at most timeout for the process to exit and returns its status.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("baton %v still running after %v; stderr:\n%s", p.cmd.Args[1:], timeout, p.stderr.String())
		return -1
	}
}

// runBaton runs the binary to completion (at most timeout).
func runBaton(t *testing.T, timeout time.Duration, env []string, args ...string) (code int, stderr string) {
	t.Helper()
	p := start(t, env, args...)
	code = p.wait(t, timeout)
	return code, p.stderr.String()
}

// waitFile polls until path exists with non-empty content (at most timeout)
// and returns the content.
func waitFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	var content []byte
	poll.Require(t, timeout, path+" to appear", func() bool {
		var err error
		content, err = os.ReadFile(path)
		return err == nil && len(content) > 0
	})
	return string(content)
}

// awaitFile waits until the command of the baton lock p wrote path (non-empty)
// and returns the content. baton either starts the command or exits, each
// within bounds of its own (its try for the lock, the supervisor's 30 s
// start), so the wait ends with one of the two: an exit fails the test with
// baton's stderr; startBound only catches a hang.
func (p *proc) awaitFile(t *testing.T, path string) string {
	t.Helper()
	var content []byte
	exited := false
	ok := poll.Until(startBound, func() bool {
		var err error
		content, err = os.ReadFile(path)
		if err == nil && len(content) > 0 {
			return true
		}
		select {
		case <-p.done:
			exited = true
			return true
		default:
			return false
		}
	})
	switch {
	case exited:
		t.Fatalf("baton %v exited %d before its command wrote %s; stderr:\n%s", p.cmd.Args[1:], p.code, path, p.stderr.String())
	case !ok:
		t.Fatalf("baton %v neither ran its command nor exited within %v; stderr:\n%s", p.cmd.Args[1:], startBound, p.stderr.String())
	}
	return string(content)
}

// startBound bounds awaitFile: past the supervisor's own 30 s bound on a start.
const startBound = 45 * time.Second

func redisURL(s *redistest.Server) string { return "redis://" + s.Addr() + "/0" }

// fence parses a BATON_FENCING_TOKEN written to a file.
func fence(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.Fields(s)[0], 10, 64)
	if err != nil || n <= 0 {
		t.Fatalf("bad fencing token %q: %v", s, err)
	}
	return n
}

// holder starts a baton that holds key until it is signalled, and waits
// until its command runs.
func holder(t *testing.T, urls []string, key string) *proc {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	args := []string{"lock"}
	for _, u := range urls {
		args = append(args, "--redis", u)
	}
	args = append(args, key, "--", "sh", "-c", `echo "$BATON_FENCING_TOKEN" > "$READY"; exec sleep 30`)
	p := start(t, []string{"READY=" + ready}, args...)
	p.awaitFile(t, ready)
	return p
}

// stop sends SIGTERM to a holder and expects baton to exit with the status
// of its command killed by SIGTERM.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("holder exited %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGTERM), p.stderr.String())
	}
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		code     int
		stdout   string
		stderr   string
		noStdout bool
	}{
		{args: nil, code: 2, stderr: "usage: baton"},
		{args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{args: []string{"help"}, code: 0, stdout: "usage: baton"},
		{args: []string{"help", "lock"}, code: 0, stdout: "usage: baton lock"},
		{args: []string{"lock", "-h"}, code: 0, stdout: "-ttl"},
		{args: []string{"version", "extra"}, code: 2, stderr: "usage: baton version"},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(out.String(), tc.stdout) || !strings.Contains(errb.String(), tc.stderr) {
			t.Errorf("run(%q) = %d, stdout %q, stderr %q; want %d, %q, %q", tc.args, code, out.String(), errb.String(), tc.code, tc.stdout, tc.stderr)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badYAML := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badYAML, []byte("locking:\n  masters: [redis://x\n  prefix: p\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badType := filepath.Join(dir, "type.yaml")
	if err := os.WriteFile(badType, []byte("scheduler: {workers: 3}\nlocking:\n  masters: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badKey := filepath.Join(dir, "key.yaml")
	if err := os.WriteFile(badKey, []byte("redsi: {url: redis://127.0.0.1:1/0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := "redis://127.0.0.1:1/0"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no key", []string{"lock"}, "missing KEY"},
		{"internal key", []string{"lock", "exec:report", "--", "true"}, "a name baton uses for its own leases"},
		{"election key", []string{"lock", "cluster-leader", "--", "true"}, "a name baton uses for its own leases"},
		{"no separator", []string{"lock", "k", "true"}, "missing --"},
		{"no command", []string{"lock", "k", "--"}, "missing CMD"},
		{"no separator no command", []string{"lock", "k"}, "missing --"},
		{"bad duration", []string{"lock", "--ttl", "soon", "k", "--", "true"}, "invalid value"},
		{"unknown flag", []string{"lock", "--frob", "k", "--", "true"}, "frob"},
		{"zero ttl", []string{"lock", "--redis", r, "--ttl", "0s", "k", "--", "true"}, "--ttl"},
		{"negative wait", []string{"lock", "--redis", r, "--wait", "-1s", "k", "--", "true"}, "--wait"},
		{"ttl too short", []string{"lock", "--redis", r, "--ttl", "5ms", "k", "--", "true"}, "too short"},
		{"bad scheme", []string{"lock", "--redis", "http://127.0.0.1:1", "k", "--", "true"}, "bad Redis URL"},
		{"bad port", []string{"lock", "--redis", "redis://:secret@127.0.0.1:port", "k", "--", "true"}, "bad Redis URL"},
		{"no // before the host", []string{"lock", "--redis", "redis:secret@127.0.0.1:1/0", "k", "--", "true"}, "bad Redis URL redis:xxxxx@127.0.0.1:1/0 (--redis): no // after the scheme"},
		{"no host", []string{"lock", "--redis", "redis://:secret@:1/0", "k", "--", "true"}, "no host name"},
		{"duplicate master", []string{"lock", "--redis", r, "--redis", "redis://127.0.0.1:1/1", "k", "--", "true"}, "listed twice"},
		{"fair with quorum", []string{"lock", "--fair", "--redis", r, "--redis", "redis://127.0.0.1:2", "--redis", "redis://127.0.0.1:3", "k", "--", "true"}, "fair"},
		{"stray argument", []string{"lock", "k", "x", "--", "true"}, `unexpected argument "x"`},
		{"missing config", []string{"lock", "--config", filepath.Join(dir, "nope.yaml"), "k", "--", "true"}, "nope.yaml"},
		{"bad yaml", []string{"lock", "--config", badYAML, "k", "--", "true"}, badYAML + ":1: "},
		{"bad yaml type", []string{"lock", "--config", badType, "k", "--", "true"}, badType + ":3: locking.masters: expected a list"},
		{"unknown key", []string{"lock", "--config", badKey, "k", "--", "true"}, badKey + `:1: redsi: unknown field "redsi" (did you mean "redis"?)`},
	} {
		var out, errb bytes.Buffer
		code := run(tc.args, &out, &errb)
		msg := errb.String()
		if code != exitUsage || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "usage: baton lock") {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q plus usage", tc.name, code, msg, exitUsage, tc.want)
		}
		if strings.Contains(msg, "secret") {
			t.Errorf("%s: password printed: %q", tc.name, msg)
		}
		if lines := strings.Count(msg, "\n"); lines != 2 {
			t.Errorf("%s: want one message line plus usage, got %q", tc.name, msg)
		}
	}
}

func TestRunsCommandWithStatusAndEnv(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	script := `echo "$BATON_FENCING_TOKEN $BATON_LOCK_KEY" > "$OUT"; exit 3`
	var fences []int64
	for range 2 {
		code, stderr := runBaton(t, 20*time.Second, []string{"OUT=" + out},
			"lock", "--redis", redisURL(srv), "job:env", "--", "sh", "-c", script)
		if code != 3 {
			t.Fatalf("exit %d, want 3 (the command's status); stderr:\n%s", code, stderr)
		}
		if stderr != "" {
			t.Errorf("unexpected stderr: %q", stderr)
		}
		got := waitFile(t, out, time.Second)
		if f := strings.Fields(got); len(f) != 2 || f[1] != "job:env" {
			t.Fatalf("command saw %q, want fence and key job:env", got)
		}
		fences = append(fences, fence(t, got))
		os.Remove(out)
	}
	if fences[1] <= fences[0] {
		t.Fatalf("fencing tokens did not increase: %v", fences)
	}
}

func TestSecondInvocationIsBusy(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	urls := []string{redisURL(srv)}
	first := holder(t, urls, "job:busy")

	ran := filepath.Join(t.TempDir(), "ran")
	began := time.Now()
	code, stderr := runBaton(t, 10*time.Second, []string{"RAN=" + ran},
		"lock", "--redis", urls[0], "job:busy", "--", "sh", "-c", `touch "$RAN"`)
	if code != exitBusy {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitBusy, stderr)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("busy answer took %v", d)
	}
	if want := `baton lock: "job:busy" is held by another process (waited 0s)` + "\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the second command ran although the lock was held")
	}
	first.stop(t) // SIGTERM is forwarded; sleep dies of it: 128+15
}

// waitingFor polls Redis until a waiter is registered on key (the waiter set
// the locking package keeps next to the lock).
func waitingFor(t *testing.T, srv *redistest.Server, key string) {
	t.Helper()
	rdb := srv.TestClient(t)
	poll.Require(t, 10*time.Second, "a waiter on "+key, func() bool {
		n, err := rdb.ZCard(context.Background(), "baton:lock:{"+key+"}:w").Result()
		return err == nil && n > 0
	})
}

func TestWaitRunsAfterHolderFinishes(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	ready, goOn, out := filepath.Join(dir, "ready"), filepath.Join(dir, "go"), filepath.Join(dir, "out")
	first := start(t, []string{"READY=" + ready, "GO=" + goOn},
		"lock", "--redis", redisURL(srv), "job:wait", "--", "sh", "-c",
		`echo "$BATON_FENCING_TOKEN" > "$READY"; while [ ! -e "$GO" ]; do sleep 0.02; done`)
	f1 := fence(t, first.awaitFile(t, ready))

	second := start(t, []string{"OUT=" + out},
		"lock", "--redis", redisURL(srv), "--wait", "20s", "job:wait", "--", "sh", "-c", `echo "$BATON_FENCING_TOKEN" > "$OUT"`)
	waitingFor(t, srv, "job:wait")
	if _, err := os.Stat(out); err == nil {
		t.Fatal("the waiting command ran while the lock was held")
	}
	if err := os.WriteFile(goOn, []byte("go"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("first exited %d; stderr:\n%s", code, first.stderr.String())
	}
	if code := second.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("second exited %d; stderr:\n%s", code, second.stderr.String())
	}
	if f2 := fence(t, waitFile(t, out, time.Second)); f2 <= f1 {
		t.Fatalf("fence %d after %d", f2, f1)
	}
}

func TestWaitTimesOutBusy(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	first := holder(t, []string{redisURL(srv)}, "job:waitbusy")
	code, stderr := runBaton(t, 10*time.Second, nil,
		"lock", "--redis", redisURL(srv), "--wait", "300ms", "job:waitbusy", "--", "true")
	if code != exitBusy || !strings.Contains(stderr, "(waited 300ms)") {
		t.Fatalf("exit %d, stderr %q; want %d and the wait", code, stderr, exitBusy)
	}
	first.stop(t)
}

func TestSignalWhileWaiting(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	first := holder(t, []string{redisURL(srv)}, "job:sigwait")
	ran := filepath.Join(t.TempDir(), "ran")
	second := start(t, []string{"RAN=" + ran},
		"lock", "--redis", redisURL(srv), "--wait", "30s", "job:sigwait", "--", "sh", "-c", `touch "$RAN"`)
	waitingFor(t, srv, "job:sigwait")
	if err := second.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := second.wait(t, 10*time.Second); code != 128+int(syscall.SIGINT) {
		t.Fatalf("waiting baton exited %d after SIGINT; stderr:\n%s", code, second.stderr.String())
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("command ran after the wait was interrupted")
	}
	first.stop(t)
}

func TestQuorumOfThree(t *testing.T) {
	t.Parallel()
	srvs := redistest.NewN(t, 3)
	var urls []string
	var args []string
	for _, s := range srvs {
		urls = append(urls, redisURL(s))
		args = append(args, "--redis", redisURL(s))
	}
	out := filepath.Join(t.TempDir(), "out")
	code, stderr := runBaton(t, 20*time.Second, []string{"OUT=" + out},
		append(append([]string{"lock"}, args...), "job:quorum", "--", "sh", "-c", `echo "$BATON_FENCING_TOKEN" > "$OUT"`)...)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	fence(t, waitFile(t, out, time.Second))

	first := holder(t, urls, "job:quorum")
	code, stderr = runBaton(t, 10*time.Second, nil,
		append(append([]string{"lock"}, args...), "job:quorum", "--", "true")...)
	if code != exitBusy {
		t.Fatalf("second exit %d, want %d; stderr:\n%s", code, exitBusy, stderr)
	}
	first.stop(t)
}

// freePort returns a loopback port with nothing listening on it.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestUnreachableRedis(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	u := fmt.Sprintf("redis://:secret@127.0.0.1:%d/0", port)
	ran := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		env, flags []string
	}{
		{[]string{"BATON_REDIS_URL=" + u}, nil},                                     // the environment default
		{[]string{"BATON_REDIS_URL=redis://127.0.0.1:1/0"}, []string{"--redis", u}}, // --redis wins
	} {
		args := append(append([]string{"lock"}, tc.flags...), "job:down", "--", "sh", "-c", `touch "$RAN"`)
		began := time.Now()
		code, stderr := runBaton(t, 20*time.Second, append(tc.env, "RAN="+ran), args...)
		if code != exitUnavailable {
			t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUnavailable, stderr)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("took %v", d)
		}
		if strings.Contains(stderr, "secret") {
			t.Fatalf("password printed: %q", stderr)
		}
		if !strings.Contains(stderr, fmt.Sprintf("redis://:xxxxx@127.0.0.1:%d", port)) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("want one line naming the redacted master, got %q", stderr)
		}
		if _, err := os.Stat(ran); err == nil {
			t.Fatal("command ran without the lock")
		}
	}
}

func TestQuorumLostMajorityUnavailable(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	args := []string{"lock", "--redis", redisURL(srv)}
	for range 2 {
		args = append(args, "--redis", fmt.Sprintf("redis://u:hunter2@127.0.0.1:%d", freePort(t)))
	}
	code, stderr := runBaton(t, 20*time.Second, nil, append(args, "job:minority", "--", "true")...)
	if code != exitUnavailable || strings.Contains(stderr, "hunter2") || !strings.Contains(stderr, "of 3 Redis masters failed, 2 must answer") {
		t.Fatalf("exit %d, stderr %q; want %d, masters failed, no password", code, stderr, exitUnavailable)
	}
}

func TestConfigFile(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "baton.yaml")
	yml := fmt.Sprintf(`# a full baton config; lock uses locking.masters and namespace
namespace: cfgtest
max_clock_skew: 1s
redis:
  url: redis://127.0.0.1:1/0
locking:
  masters:
    - %s
jobs:
  - name: report
    schedule: "@hourly"
    exec: {command: ["true"]}
`, redisURL(srv))
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	// baton init --config would look for running replicas on redis.url,
	// which is down here: the lock master is marked as baton lock's
	initMasters(t, nil, []string{"--redis", redisURL(srv), "--prefix", "cfgtest:lock:"})
	out := filepath.Join(dir, "out")
	code, stderr := runBaton(t, 20*time.Second, []string{"OUT=" + out},
		"lock", "--config", cfg, "job:cfg", "--", "sh", "-c", `echo "$BATON_FENCING_TOKEN" > "$OUT"`)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	fence(t, waitFile(t, out, time.Second))
	n, err := srv.TestClient(t).Exists(context.Background(), "cfgtest:lock:{job:cfg}:fence").Result()
	if err != nil || n != 1 {
		t.Fatalf("namespace from config not used as the prefix: exists=%d err=%v", n, err)
	}

	// explicit --redis wins over the file
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("redis:\n  url: redis://127.0.0.1:1/0\nlocking:\n  masters: [\"redis://127.0.0.1:1/0\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr = runBaton(t, 20*time.Second, nil, "lock", "--config", bad, "--redis", redisURL(srv), "job:cfg", "--", "true")
	if code != 0 {
		t.Fatalf("--redis over config: exit %d; stderr:\n%s", code, stderr)
	}
}

func TestCommandNotFoundReleasesLock(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	for _, cmd := range []string{"/nonexistent/baton-test-cmd", "baton-test-no-such-command"} {
		code, stderr := runBaton(t, 20*time.Second, nil, "lock", "--redis", redisURL(srv), "job:nf", "--", cmd)
		if code != exitNotFound || !strings.Contains(stderr, cmd) {
			t.Fatalf("%s: exit %d, stderr %q; want %d", cmd, code, stderr, exitNotFound)
		}
		// released: the next run does not find the lock busy
		if code, stderr := runBaton(t, 20*time.Second, nil, "lock", "--redis", redisURL(srv), "job:nf", "--", "true"); code != 0 {
			t.Fatalf("after not found: exit %d; stderr:\n%s", code, stderr)
		}
	}
}

func TestLeaseExtendedWhileCommandRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	// the command outlives 2.5 ttls; auto-extension must keep the lease.
	// An extension comes every ttl/3, and the supervisor sends SIGTERM at
	// half the time left when it last heard of one: an extension may come
	// ttl/6 late (330ms here; 33ms of a 200ms lease, less than a busy host
	// can stall a process, which then rightly loses the command).
	// --wait: a single try is refused when its answer comes after the
	// lease's validity; waiting tries again
	code, stderr := runBaton(t, 20*time.Second, nil,
		"lock", "--redis", redisURL(srv), "--ttl", "2s", "--wait", "10s", "job:extend", "--", "sleep", "5")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0 and silence", code, stderr)
	}
}

// gone reports whether pid no longer runs (absent or a zombie awaiting its
// reaper).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}

func TestLockLostStopsCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	t.Cleanup(func() { _ = srv.Resume() })
	pids := filepath.Join(t.TempDir(), "pids")
	// a lease long enough that a busy host does not lose it before the pause
	// (see TestLeaseExtendedWhileCommandRuns), lost within a second after it
	p := start(t, []string{"PIDS=" + pids},
		"lock", "--redis", redisURL(srv), "--ttl", "1s", "--wait", "10s", "--grace", "5s", "job:lost", "--", "sh", "-c",
		`sleep 30 & echo "$$ $!" > "$PIDS.tmp" && mv "$PIDS.tmp" "$PIDS"; wait`)
	var shPID, sleepPID int
	if _, err := fmt.Sscan(p.awaitFile(t, pids), &shPID, &sleepPID); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t, 15*time.Second)
	if code != exitLockLost {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitLockLost, p.stderr.String())
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Errorf("loss handled after %v", d)
	}
	stderr := p.stderr.String()
	if !regexp.MustCompile(`^baton lock: lock "job:lost" lost: .+\n$`).MatchString(stderr) {
		t.Errorf("stderr %q, want one lost-lock line", stderr)
	}
	poll.Require(t, 5*time.Second, "the command and its child to be gone", func() bool { return gone(shPID) && gone(sleepPID) })
}

func TestSignalForwarded(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	ready, out := filepath.Join(dir, "ready"), filepath.Join(dir, "out")
	p := start(t, []string{"READY=" + ready, "OUT=" + out},
		"lock", "--redis", redisURL(srv), "job:signal", "--", "sh", "-c",
		// a foreground loop: a TERM that lands while sh forks a background
		// child could be swallowed by that child before it execs
		`trap 'echo got > "$OUT"; exit 0' TERM; touch "$READY"; while :; do sleep 0.05; done`)
	poll.Require(t, 10*time.Second, "the command to start", func() bool { _, err := os.Stat(ready); return err == nil })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit %d, want the trap's 0; stderr:\n%s", code, p.stderr.String())
	}
	if got := waitFile(t, out, time.Second); got != "got\n" {
		t.Fatalf("command wrote %q", got)
	}
	if code, stderr := runBaton(t, 20*time.Second, nil, "lock", "--redis", redisURL(srv), "job:signal", "--", "true"); code != 0 {
		t.Fatalf("lock not released after the command exited: %d; stderr:\n%s", code, stderr)
	}
}

func TestLockLostKillsAfterGrace(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	t.Cleanup(func() { _ = srv.Resume() })
	pids := filepath.Join(t.TempDir(), "pids")
	// ignores SIGTERM (and so do the sleeps it starts): only SIGKILL stops it
	// a lease long enough that a busy host does not lose it before the pause
	// (see TestLeaseExtendedWhileCommandRuns), lost within a second after it
	p := start(t, []string{"PIDS=" + pids},
		"lock", "--redis", redisURL(srv), "--ttl", "1s", "--wait", "10s", "--grace", "300ms", "job:grace", "--", "sh", "-c",
		`trap '' TERM; echo $$ > "$PIDS"; while :; do sleep 0.05; done`)
	pid, err := strconv.Atoi(strings.TrimSpace(p.awaitFile(t, pids)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 15*time.Second); code != exitLockLost {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitLockLost, p.stderr.String())
	}
	poll.Require(t, 5*time.Second, "the command to be gone", func() bool { return gone(pid) })
}

func TestFairSingleMaster(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	code, stderr := runBaton(t, 20*time.Second, nil, "lock", "--redis", redisURL(srv), "--fair", "--wait", "2s", "job:fair", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
}
