//go:build linux

package supervisor_test

// The supervisor as a child subreaper: descendants that left the group.

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/supervisor"
)

// A stuck supervisor killed by baton (its last resort) takes a double-forked
// setsid daemon of its job with it.
func TestSupervisorKilledTakesSetsidEscapees(t *testing.T) {
	orphan := filepath.Join(t.TempDir(), "orphan")
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", `( setsid sh -c 'echo $$ > ` + orphan + `; exec sleep 100' & ); sleep 100`}})
	pid := readPidFile(t, orphan)
	if sid, _ := unix.Getsid(pid); sid != pid {
		t.Fatalf("pid %d is in session %d: no escapee", pid, sid)
	}
	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil { // unresponsive
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = wait(t, p)
	if !poll.Until(2*time.Second, func() bool { return !alive(pid) }) {
		t.Errorf("setsid'd pid %d outlived the killed supervisor (state %s, parent %d)", pid, procState(pid), ppid(pid))
	}
}

// Orphans of a long-running job reparented to the supervisor are reaped as
// they exit, not when the job ends.
func TestReparentedOrphansAreReapedWhileTheJobRuns(t *testing.T) {
	done := filepath.Join(t.TempDir(), "done")
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", `i=0; while [ $i -lt 200 ]; do ( true & ); i=$((i+1)); done; echo ok > ` + done + `; sleep 100`}})
	poll.Require(t, 10*time.Second, "the job to get through its loop", func() bool { _, err := os.Stat(done); return err == nil })
	// the job sleeps on for 100s: orphans reaped now were reaped while it runs
	zombies := func() int {
		n := 0
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if ppid(pid) == p.Pid() && procState(pid) == "Z" {
				n++
			}
		}
		return n
	}
	if !poll.Until(5*time.Second, func() bool { return zombies() <= 10 }) {
		t.Errorf("%d zombies wait under the supervisor %d while its job runs", zombies(), p.Pid())
	}
}

func ppid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}
