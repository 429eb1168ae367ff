//go:build linux

package runcgroup_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/batonhq/baton/internal/runcgroup"
	"github.com/batonhq/baton/internal/runcgroup/runcgrouptest"
)

// newRun makes a run's cgroup in a test's Root, for job "nightly".
func newRun(t *testing.T) (*runcgroup.Root, string) {
	t.Helper()
	root := runcgrouptest.Root(t)
	dir, err := root.New("nightly")
	if err != nil {
		t.Fatal(err)
	}
	return root, dir
}

// requireRemoved removes dir and fails the test unless pid is dead and dir
// gone.
func requireRemoved(t *testing.T, dir string, pid int) {
	t.Helper()
	if err := runcgroup.Remove(dir, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	requireGone(t, dir, pid)
}

// requireGone fails the test unless pid is dead and dir gone.
func requireGone(t *testing.T, dir string, pid int) {
	t.Helper()
	if runcgrouptest.Alive(pid) {
		t.Errorf("pid %d outlived its cgroup's removal", pid)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup %s still there (%v)", dir, err)
	}
}

func TestRemoveKillsAProcessThatLeftItsSessionRenamedItselfAndClearedItsEnvironment(t *testing.T) {
	root, dir := newRun(t)
	if filepath.Dir(dir) != root.Dir() || !strings.HasSuffix(dir, "-nightly") {
		t.Errorf("cgroup %s is not in %s named after its job", dir, root.Dir())
	}
	requireRemoved(t, dir, runcgrouptest.EscapeeIn(t, dir))
}

// Before Linux 5.14 there is no cgroup.kill: the cgroup is frozen, and
// each process in it killed.
func TestRemoveWithoutCgroupKillFreezesAndKillsEachProcess(t *testing.T) {
	_, dir := newRun(t)
	pid := runcgrouptest.EscapeeIn(t, dir)
	defer runcgroup.WithoutCgroupKill()()
	var kept []int
	n, err := runcgroup.Kill(dir, func(pid, fd int) { kept = append(kept, pid); unix.Close(fd) })
	if err != nil || n != 2 || len(kept) != 2 {
		t.Errorf("Kill = %d, %v, kept %v; want the shell and the escapee", n, err, kept)
	}
	requireRemoved(t, dir, pid)
}

// A process of the job that made a cgroup below its run's, and moved into
// it, is killed and its cgroup removed with the run's.
func TestRemoveTakesTheCgroupsAJobMadeBelowItsOwn(t *testing.T) {
	_, dir := newRun(t)
	below := filepath.Join(dir, "mine")
	if err := os.Mkdir(below, 0o755); err != nil {
		t.Fatal(err)
	}
	requireRemoved(t, dir, runcgrouptest.EscapeeIn(t, below))
}

// The cgroups of a baton that is gone (crashed, or killed with its
// supervisors) are removed, their processes killed; those of live
// processes, this one and another, and those made in another pid
// namespace are left alone.
func TestRemoveLeftoversRemovesOnlyTheCgroupsOfAGoneProcess(t *testing.T) {
	root := runcgrouptest.Root(t)
	leftover, escapee := runcgrouptest.Leftover(t, root)
	other := exec.Command("sleep", "1000")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	others := runcgrouptest.CgroupOf(t, root, other.Process.Pid)
	own, err := root.New("nightly")
	if err != nil {
		t.Fatal(err)
	}
	alive := runcgrouptest.EscapeeIn(t, own)
	// made in another pid namespace: its maker cannot be seen from here
	elsewhere := filepath.Join(root.Dir(), "baton-1-"+strings.TrimPrefix(filepath.Base(leftover), "baton-"))
	if err := os.Mkdir(elsewhere, 0o755); err != nil {
		t.Fatal(err)
	}

	removed, err := root.RemoveLeftovers()
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0].Dir != leftover || removed[0].Killed != 2 {
		t.Errorf("RemoveLeftovers removed %+v; want %s with its 2 processes", removed, leftover)
	}
	requireGone(t, leftover, escapee)
	for _, dir := range []string{others, own, elsewhere} {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the cgroup of a live process, or of another pid namespace, was removed: %v", err)
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
