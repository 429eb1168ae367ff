package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/devredis"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/locking"
)

// TestMiniredisCompat checks, in-process, what baton dev relies on from the
// embedded server: the lock scripts (acquire, release, fencing), expiry in
// real time through devredis's clock, waiters woken by pub/sub, and asynq's task
// ID dedup with retention. (The scheduler's claim scripts and the asynq
// server run in TestDevSmoke.)
func TestMiniredisCompat(t *testing.T) {
	t.Parallel()
	mr, err := devredis.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()

	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks, err := locking.New(rdb, locking.WithFreshDeployment(), locking.WithPrefix("baton:lock:"), locking.WithLogger(newSlog(newZerolog(nopWriter{}, logFormatJSON, 0), nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// acquire, busy, expiry in real time
	l1, err := locks.TryLock(ctx, "k", 300*time.Millisecond, locking.WithAutoExtend(false))
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if _, err := locks.TryLock(ctx, "k", time.Second); !errors.Is(err, locking.ErrNotObtained) {
		t.Fatalf("second TryLock: %v, want not obtained", err)
	}
	time.Sleep(400 * time.Millisecond) // real time: not auto-extended, the key expires by Redis's clock
	l2, err := locks.TryLock(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatalf("TryLock after expiry: %v", err)
	}
	if l2.Fence() <= l1.Fence() {
		t.Errorf("fence %d after %d", l2.Fence(), l1.Fence())
	}

	// a waiter is woken by the release (pub/sub), long before the ttl
	got := make(chan error, 1)
	began := time.Now()
	go func() {
		l3, err := locks.Lock(ctx, "k", time.Second)
		if err == nil {
			err = l3.Release(ctx)
		}
		got <- err
	}()
	// the waiter is registered (in the waiter set) once it listens for the release
	poll.Require(t, 5*time.Second, "the waiter to register", func() bool {
		n, err := rdb.ZCard(ctx, "baton:lock:{k}:w").Result()
		return err == nil && n > 0
	})
	if err := l2.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("waiter woken after %v; the ttl was 5s", d)
	}

	// asynq: a task ID is refused while the task is retained
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: mr.Addr()})
	defer client.Close()
	task := func() *asynq.Task {
		return asynq.NewTask("t", nil, asynq.TaskID("job@2026-01-01T00:00:00Z"), asynq.Retention(time.Minute))
	}
	if _, err := client.EnqueueContext(ctx, task()); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	if _, err := client.EnqueueContext(ctx, task()); !errors.Is(err, asynq.ErrTaskIDConflict) {
		t.Fatalf("second enqueue: %v, want task ID conflict", err)
	}
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// The production binary carries no test server: miniredis is linked only
// into a build with the "dev" tag, and the production binary's baton dev
// says how to get one.
func TestProductionBinaryHasNoTestServer(t *testing.T) {
	t.Parallel()
	deps := func(bin string) string {
		out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
		if err != nil {
			t.Fatalf("go version -m %s: %v\n%s", bin, err, out)
		}
		return string(out)
	}
	if d := deps(batonBin); strings.Contains(d, "miniredis") {
		t.Errorf("the production binary links miniredis:\n%s", d)
	}
	if d := deps(devBin); !strings.Contains(d, "miniredis") {
		t.Errorf("the dev binary does not link miniredis; the check above proves nothing:\n%s", d)
	}
	out, err := exec.Command(batonBin, "dev").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "go run -tags dev ./cmd/baton dev") {
		t.Errorf("baton dev on the production binary: %v, %q", err, out)
	}
}

// baton dev gives each run a directory of its own in $BATON_DEV_DIR, and
// config.example.yaml's jobs write their logs there: two baton dev runs on
// one host do not mix.
func TestExampleJobsLogInTheDevRunsDirectory(t *testing.T) {
	t.Setenv(devDirEnv, "")
	os.Unsetenv(devDirEnv)
	dir, err := devDir()
	if err != nil || os.Getenv(devDirEnv) != dir {
		t.Fatalf("devDir: %q %v, $%s %q", dir, err, devDirEnv, os.Getenv(devDirEnv))
	}
	defer os.RemoveAll(dir)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("no directory %s: %v", dir, err)
	}
	if again, _ := devDir(); again != dir {
		t.Errorf("a set $%s is kept: got %q, want %q", devDirEnv, again, dir)
	}
	cfg, err := config.LoadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range cfg.Jobs {
		if j.Exec == nil || !strings.Contains(strings.Join(j.Exec.Command, " "), "baton-") {
			continue
		}
		script := j.Exec.Command[len(j.Exec.Command)-1]
		if !strings.Contains(script, `"${BATON_DEV_DIR:-/tmp}"`) || !slices.Contains(j.Exec.InheritEnv, devDirEnv) {
			t.Errorf("job %s does not write in $%s: %q, inherit_env %v", j.Name, devDirEnv, script, j.Exec.InheritEnv)
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), devDirEnv + "=" + dir, "BATON_TICK=T"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("job %s: %v %s", j.Name, err, out)
		}
	}
	if logs, _ := filepath.Glob(filepath.Join(dir, "baton-*.log")); len(logs) < 3 {
		t.Errorf("the example's jobs wrote %v in %s", logs, dir)
	}
}

// baton dev writes the config the other commands take to reach its run:
// the dev config pointed at the embedded server, fresh (the server is new
// at every start and reports no run_id), its jobs and ${VAR}s as written.
func TestDevWritesTheOtherCommandsConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "dev.yaml")
	if err := os.WriteFile(src, []byte(`redis: {url: "redis://elsewhere:6379/0"}
locking: {masters: ["redis://m1:6379/0"], restart_quarantine: 30s}
jobs:
  - name: report
    schedule: "@hourly"
    exec: {command: ["echo", "${HOME}"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cli, err := devCLIConfig(src, filepath.Join(dir, "run"), "redis://127.0.0.1:4242/0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(cli)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.URL != "redis://127.0.0.1:4242/0" || !cfg.Locking.FreshDeployment || len(cfg.Locking.Masters) != 0 || len(cfg.Jobs) != 1 {
		t.Fatalf("the other commands' config: %+v %+v", cfg.Redis, cfg.Locking)
	}
	if b, _ := os.ReadFile(cli); !strings.Contains(string(b), "${HOME}") {
		t.Errorf("the config expanded a ${VAR}:\n%s", b)
	}
}

// The runtime schedule of the docs' examples runs under baton dev: its
// replicas register the Go handler "report", so a put naming it is not
// refused (no live replica runs it) and its ticks run, logged with their
// payload.
func TestDevRunsARuntimeScheduleOfTheDocs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join(dir, "run")
	if err := os.Mkdir(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := startIn(t, "../..", []string{devDirEnv + "=" + runDir}, "dev")
	poll.Require(t, time.Minute, "baton dev to start its replicas", func() bool {
		return strings.Count(p.stderr.String(), "replica started") >= 3
	})
	cli := filepath.Join(runDir, "baton.yaml")
	code, out, errs := runIn("schedules", "put", "report/t-1", "--schedule", "@every 1s", "--handler", "report",
		"--payload", `{"tenant": 1}`, "--config", cli)
	if code != 0 || strings.Contains(out, "WAITING") || strings.Contains(out, "waiting") {
		t.Fatalf("put under baton dev: %d %q %q", code, out, errs)
	}
	poll.Require(t, time.Minute, "the report handler to run the schedule's tick", func() bool {
		s := p.stderr.String()
		return strings.Contains(s, "report handler ran") && strings.Contains(s, `{\"tenant\":1}`)
	})
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Errorf("baton dev exited %d", code)
	}
}
