//go:build linux

package runcgroup_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/runcgroup"
	"github.com/batonhq/baton/internal/runcgroup/runcgrouptest"
)

// startIn starts sh -c script in the cgroup dir (clone3 into it, as the
// supervisor starts a run's child) and reaps it at the end of the test.
func startIn(t *testing.T, dir, script string) *exec.Cmd {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// escapeeIn starts, in the cgroup dir, a shell that starts an escapee
// (runcgrouptest.Escapee) and waits; it returns the escapee's pid.
func escapeeIn(t *testing.T, dir string) int {
	t.Helper()
	cmd := startIn(t, dir, runcgrouptest.Escapee(t, "escapee")+` wait`)
	pidFile := filepath.Join(cmd.Dir, "escapee")
	var pid int
	poll.Require(t, 10*time.Second, "a pid in "+pidFile, func() bool {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid > 0
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	runcgrouptest.RequireEscaped(t, pid)
	return pid
}

// requireRemoved fails the test unless pid is dead and dir gone.
func requireRemoved(t *testing.T, dir string, pid int) {
	t.Helper()
	if runcgrouptest.Alive(pid) {
		t.Errorf("pid %d outlived its cgroup's removal", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup %s still there (%v)", dir, err)
	}
}

func TestRemoveKillsAProcessThatLeftItsSessionRenamedItselfAndClearedItsEnvironment(t *testing.T) {
	dir, err := runcgrouptest.Root(t).New("nightly")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(dir, "-nightly") {
		t.Errorf("cgroup %s is not named after its job", dir)
	}
	pid := escapeeIn(t, dir)
	if err := runcgroup.Remove(dir, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	requireRemoved(t, dir, pid)
}

// Before Linux 5.14 there is no cgroup.kill: the cgroup is frozen, and
// each process in it killed.
func TestRemoveWithoutCgroupKillFreezesAndKillsEachProcess(t *testing.T) {
	dir, err := runcgrouptest.Root(t).New("nightly")
	if err != nil {
		t.Fatal(err)
	}
	pid := escapeeIn(t, dir)
	defer runcgroup.WithoutCgroupKill()()
	var kept []int
	n, err := runcgroup.Kill(dir, func(pid, fd int) { kept = append(kept, pid); unix.Close(fd) })
	if err != nil || n != 2 || len(kept) != 2 {
		t.Errorf("Kill = %d, %v, kept %v; want the shell and the escapee", n, err, kept)
	}
	if err := runcgroup.Remove(dir, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	requireRemoved(t, dir, pid)
}

// A process of the job that made a cgroup below its run's, and moved into
// it, is killed and its cgroup removed with the run's.
func TestRemoveTakesTheCgroupsAJobMadeBelowItsOwn(t *testing.T) {
	dir, err := runcgrouptest.Root(t).New("nightly")
	if err != nil {
		t.Fatal(err)
	}
	below := filepath.Join(dir, "mine")
	if err := os.Mkdir(below, 0o755); err != nil {
		t.Fatal(err)
	}
	pid := escapeeIn(t, below)
	if err := runcgroup.Remove(dir, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	requireRemoved(t, dir, pid)
}

// The cgroups of a baton that is gone (crashed, or killed with its
// supervisors) are removed, their processes killed; those of live
// processes, this one and another, are left alone.
func TestRemoveLeftoversRemovesOnlyTheCgroupsOfAGoneProcess(t *testing.T) {
	root := runcgrouptest.Root(t)
	gone := exec.Command("sleep", "1000")
	if err := gone.Start(); err != nil {
		t.Fatal(err)
	}
	goneStart := startTime(t, gone.Process.Pid)
	_ = gone.Process.Kill()
	_ = gone.Wait()
	other := exec.Command("sleep", "1000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })

	dirOf := func(pid int, start uint64) string {
		dir := filepath.Join(root.Dir(), fmt.Sprintf("baton-%d-%d-0badcafe-nightly", pid, start))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	leftover := dirOf(gone.Process.Pid, goneStart)
	escapee := escapeeIn(t, leftover)
	others := dirOf(other.Process.Pid, startTime(t, other.Process.Pid))
	own, err := root.New("nightly")
	if err != nil {
		t.Fatal(err)
	}
	alive := escapeeIn(t, own)

	removed, err := root.RemoveLeftovers()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Dir != leftover || removed[0].Killed != 2 {
		t.Errorf("RemoveLeftovers removed %+v; want %s with its 2 processes", removed, leftover)
	}
	requireRemoved(t, leftover, escapee)
	for _, dir := range []string{others, own} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the cgroup of a live process was removed: %v", err)
		}
	}
	if !runcgrouptest.Alive(alive) {
		t.Errorf("pid %d of this process's run was killed", alive)
	}
}

func TestOpenRefusesWhatIsNoCgroupV2(t *testing.T) {
	for _, dir := range []string{t.TempDir(), runcgroup.Off, "/no/such/dir"} {
		if r, err := runcgroup.Open(dir); !errors.Is(err, runcgroup.ErrUnavailable) {
			t.Errorf("Open(%q) = %v, %v; want ErrUnavailable", dir, r, err)
		}
	}
}

// startTime reads pid's start time from /proc/PID/stat.
func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return start
}
