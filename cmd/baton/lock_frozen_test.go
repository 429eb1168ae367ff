package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// TestFrozenLockStopsCommandBeforeLeaseEnds freezes `baton lock` itself
// (SIGSTOP) while its command runs: nothing extends the lease any more, and
// the command ignores SIGTERM. The supervisor must kill it before the lease
// ends, so when another process takes the lock the command is gone (G3).
// Before the supervisor, the command ran on without the lock until baton
// was resumed.
func TestFrozenLockStopsCommandBeforeLeaseEnds(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the supervisor is Linux only")
	}
	t.Parallel()
	srv := redistest.New(t)
	pids := filepath.Join(t.TempDir(), "pids")
	p := start(t, []string{"PIDS=" + pids},
		"lock", "--redis", redisURL(srv), "--ttl", "1s", "--grace", "300ms", "job:frozen", "--", "sh", "-c",
		`trap '' TERM; echo $$ > "$PIDS.tmp" && mv "$PIDS.tmp" "$PIDS"; while :; do sleep 0.05; done`)
	pid, err := strconv.Atoi(strings.TrimSpace(p.awaitFile(t, pids)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer p.cmd.Process.Signal(syscall.SIGCONT)

	locks, err := locking.New(srv.TestClient(t), locking.WithFreshDeployment(), locking.WithPrefix(defaultPrefix))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	// the next holder: it gets the lock once the frozen holder's lease
	// expires in Redis, and at that moment the command must be gone
	lease, err := locks.Lock(ctx, "job:frozen", time.Second)
	if err != nil {
		t.Fatalf("the lock was never freed: %v", err)
	}
	alive := !gone(pid)
	_ = lease.Release(context.Background())
	if alive {
		t.Fatalf("the frozen holder's command (pid %d) still ran when the next holder got the lock", pid)
	}

	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	if code := p.wait(t, 15*time.Second); code != exitLockLost {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitLockLost, p.stderr.String())
	}
	if got := strings.Count(p.stderr.String(), "\n"); got != 1 || !strings.Contains(p.stderr.String(), `lock "job:frozen" lost`) {
		t.Errorf("stderr %q, want one lost-lock line", p.stderr.String())
	}
}

// CMD reads baton lock's standard input, through the supervisor.
func TestLockPassesStdin(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	initMasters(t, nil, []string{"--redis", redisURL(srv)})
	cmd := exec.Command(batonBin, "lock", "--redis", redisURL(srv), "job:stdin", "--", "tr", "a-z", "A-Z")
	cmd.Stdin = strings.NewReader("piped input\n")
	out, err := cmd.Output()
	if err != nil || string(out) != "PIPED INPUT\n" {
		t.Fatalf("output %q, %v", out, err)
	}
}

// CMD gets PATH and the like, the lock's identity and what --inherit-env
// names; not baton's secrets (REDISCLI_AUTH, BATON_REDIS_URL with a password).
func TestLockCommandEnvironment(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	out := filepath.Join(t.TempDir(), "env")
	initMasters(t, nil, []string{"--redis", redisURL(srv)})
	cmd := exec.Command(batonBin, "lock", "--inherit-env", "APP_*", "job:env", "--", "sh", "-c", "env > "+out)
	cmd.Env = append(os.Environ(), "BATON_REDIS_URL="+redisURL(srv), "REDISCLI_AUTH=s3cret", "APP_MODE=prod", "OTHER=x")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, want := range []string{"APP_MODE=prod", "BATON_LOCK_KEY=job:env", "BATON_FENCING_TOKEN=", "PATH="} {
		if !strings.Contains(env, want) {
			t.Errorf("CMD lacks %s:\n%s", want, env)
		}
	}
	for _, no := range []string{"s3cret", "BATON_REDIS_URL", "OTHER="} {
		if strings.Contains(env, no) {
			t.Errorf("CMD got %s:\n%s", no, env)
		}
	}
	if code, _ := runBaton(t, 10*time.Second, nil, "lock", "--inherit-env", "A-B", "k", "--", "true"); code != exitUsage {
		t.Errorf("--inherit-env A-B: exit %d, want %d", code, exitUsage)
	}
}
