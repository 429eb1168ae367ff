package main

import (
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

// The lock library's warnings (it logs through slog) reach baton lock's
// stderr as "baton lock: ..." lines; its Info reports do not.
func TestLockLibraryWarningsOnStderr(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t, redistest.WithArgs("--maxmemory-policy", "allkeys-lru"))
	code, stderr := runBaton(t, 20*time.Second, nil, "lock", "--redis", redisURL(srv), "job:warn", "--", "true")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "baton lock: quorum: master 0 ("+srv.Addr()+"): maxmemory-policy is allkeys-lru") {
		t.Fatalf("stderr %q, want the eviction warning as a baton lock line", stderr)
	}
	if strings.Contains(stderr, "level=") || strings.Contains(stderr, "either way a restart is detected") {
		t.Fatalf("stderr %q: a structured line or an Info report", stderr)
	}
}

// A command that starts a setsid'd process and then SIGKILLs its
// supervisor: baton lock (a child subreaper) gets the orphan and kills it
// before it exits, saying why the command ended.
func TestLockCommandThatKillsItsSupervisorLeavesNoSetsidDescendant(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the supervisor is Linux only")
	}
	t.Parallel()
	srv := redistest.New(t)
	escapee := filepath.Join(t.TempDir(), "escapee")
	script := `setsid sh -c 'echo $$ > ` + escapee + `; exec sleep 1000' &
until [ -s ` + escapee + ` ]; do sleep 0.01; done
kill -KILL $PPID
exec sleep 1000`
	code, stderr := runBaton(t, 20*time.Second, nil, "lock", "--redis", redisURL(srv), "job:escape", "--", "sh", "-c", script)
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, escapee, time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !gone(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if code != exitCannotExec || !strings.Contains(stderr, "signal") {
		t.Errorf("exit %d, stderr %q; want %d and the supervisor's death", code, stderr, exitCannotExec)
	}
	if !gone(pid) {
		t.Errorf("setsid'd pid %d outlived baton lock", pid)
	}
}
