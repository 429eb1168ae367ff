//go:build linux

package supervisor_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/supervisor"
)

// helperEnv makes the test binary a stand-in for baton (see helperMain).
const helperEnv = "SUPERVISOR_TEST_HELPER"

func TestMain(m *testing.M) {
	supervisor.MaybeRun()
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	// Supervisors are this binary: under -race, one that exits 0 would
	// otherwise sleep 1s (the race runtime's atexit_sleep_ms) first.
	os.Setenv("GORACE", "atexit_sleep_ms=0 "+os.Getenv("GORACE"))
	goleak.VerifyTestMain(m, redistest.GoleakOptions()...)
}

// helperMain plays baton: it starts a supervised
// `sh -c 'sleep 100 & echo $! > $GPID_FILE; wait'`, prints "<supervisor
// pid> <child pid>" and then, in mode "freeze", moves the deadline to 500ms
// away and SIGSTOPs itself or, in mode "hold", waits to be killed. The
// short deadline is set once the child runs: a supervisor that starts
// slowly (a busy host) refuses to start a child past its deadline.
func helperMain(mode string) int {
	spec := supervisor.Spec{
		Path: os.Args[0],
		Args: []string{"sh", "-c", `sleep 100 & echo $! > "$GPID_FILE"; wait`},
	}
	if mode == "freeze" {
		spec.Deadline = time.Now().Add(30 * time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := supervisor.Start(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if mode == "freeze" {
		if err := p.Extend(time.Now().Add(500 * time.Millisecond)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	fmt.Printf("%d %d\n", p.Pid(), p.ChildPid())
	if mode == "freeze" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
	_, _ = p.Wait()
	return 0
}

// testCtx is a context bounded by 30s.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// procState returns the state letter of pid from /proc ("R", "S", "T",
// "Z", ...), or "" if there is no such process.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// alive reports whether pid runs: exists and is not a zombie.
func alive(pid int) bool {
	st := procState(pid)
	return st != "" && st != "Z" && st != "X"
}

// waitGone fails the test unless every pid has exited within d.
func waitGone(t *testing.T, d time.Duration, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if !poll.Until(d, func() bool { return !alive(pid) }) {
			t.Fatalf("pid %d still alive after %v", pid, d)
		}
	}
}

// killAtCleanup SIGKILLs pid at the end of the test if it still runs, so a
// failing test leaks no process.
func killAtCleanup(t *testing.T, pid int) {
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// readPidFile waits up to 10s for path to hold a pid.
func readPidFile(t *testing.T, path string) int {
	t.Helper()
	var pid int
	poll.Require(t, 10*time.Second, "a pid in "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	killAtCleanup(t, pid)
	return pid
}

// syncBuffer is a bytes.Buffer safe for the output copier and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
