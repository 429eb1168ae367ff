//go:build linux

package supervisor_test

// The process that starts supervisors as a child subreaper: the run's
// processes that outlive their supervisor.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/supervisor"
)

// requireEscapee fails the test unless pid has left its session (setsid).
func requireEscapee(t *testing.T, pid int) {
	t.Helper()
	var sid int
	if !poll.Until(5*time.Second, func() bool { sid, _ = unix.Getsid(pid); return sid == pid }) {
		t.Fatalf("pid %d is in session %d: the test did not set up an escapee", pid, sid)
	}
}

// A job that SIGKILLs its own supervisor after starting a setsid'd process:
// the supervisor's subreaping dies with it, the process is reparented to
// this process (a subreaper too), which kills and reaps it, and the child
// the supervisor reported, before Wait returns.
func TestJobThatKillsItsSupervisorLeavesNoSetsidDescendant(t *testing.T) {
	orphan := filepath.Join(t.TempDir(), "orphan")
	script := `setsid sh -c 'echo $$ > ` + orphan + `; exec sleep 1000' &
until [ -s ` + orphan + ` ]; do sleep 0.01; done
kill -KILL $PPID
exec sleep 1000`
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", script}})
	pid := readPidFile(t, orphan)
	requireEscapee(t, pid)
	if _, err := wait(t, p); err == nil || !strings.Contains(err.Error(), "signal") {
		t.Fatalf("Wait: %v, want the supervisor's death by a signal", err)
	}
	// gone, not even zombies: reaped by this process
	for _, pid := range []int{pid, p.ChildPid()} {
		if st := procState(pid); st != "" {
			t.Errorf("pid %d outlived its killed supervisor (state %s, parent %d)", pid, st, ppid(pid))
		}
	}
}

// A supervisor stopped after starting the child and before reporting its
// pid: the failed Start (its context ends) kills the whole tree, a setsid'd
// descendant included, without waiting for the supervisor's answer.
func TestAbortKillsTheTreeOfASupervisorStoppedBeforeItsReport(t *testing.T) {
	orphan := filepath.Join(t.TempDir(), "orphan")
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	started := make(chan error, 1)
	go func() {
		p, err := supervisor.Start(ctx, supervisor.Spec{
			Path: os.Args[0],
			Args: []string{"sh", "-c", `setsid sh -c 'echo $$ > ` + orphan + `; exec sleep 1000' & wait`},
			Env:  append(os.Environ(), supervisor.StopBeforeReportEnv+"=1"),
		})
		if err == nil {
			_ = p.Kill()
			_, _ = p.Wait()
		}
		started <- err
	}()
	pid := readPidFile(t, orphan)
	requireEscapee(t, pid)
	cancel()
	var err error
	select {
	case err = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return within 10s of its context's end")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Start: %v, want the context's end", err)
	}
	if st := procState(pid); st != "" {
		t.Errorf("setsid'd pid %d outlived the aborted start (state %s, parent %d)", pid, st, ppid(pid))
	}
}
