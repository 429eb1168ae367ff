//go:build linux

package supervisor_test

// A run in a cgroup of its own: what leaves the process tree and the mark.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/runcgroup/runcgrouptest"
	"github.com/batonhq/baton/internal/supervisor"
)

// The child is born in a cgroup of its own, named after the run, made in
// Spec.Cgroups; Wait returns once it is removed.
func TestChildStartsInItsRunsCgroup(t *testing.T) {
	root := runcgrouptest.Root(t)
	out := &syncBuffer{}
	p := start(t, supervisor.Spec{Args: []string{"cat", "/proc/self/cgroup"}, Cgroups: root, Name: "nightly", Stdout: out})
	if code, err := wait(t, p); code != 0 || err != nil {
		t.Fatalf("Wait = %d, %v", code, err)
	}
	var cgroup string
	for _, line := range strings.Split(out.String(), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			cgroup = p
		}
	}
	if !strings.HasPrefix(filepath.Base(cgroup), "baton-") || !strings.HasSuffix(cgroup, "-nightly") ||
		!strings.HasSuffix(root.Dir(), filepath.Dir(cgroup)) {
		t.Errorf("the child ran in cgroup %q; want one of its own named after the run in %s", cgroup, root.Dir())
	}
	runcgrouptest.RequireEmpty(t, root)
}

// A job that SIGKILLs its own supervisor after starting a process that left
// its session, renamed itself and cleared its environment (the mark with
// it): the process is found in the run's cgroup, killed and reaped before
// Wait returns, and the cgroup removed. The job kills the supervisor once
// Start returned (the file "started"): before, Start itself fails
// (TestSupervisorKilledBeforeItReportsTheChildFailsStartByItsSignal).
func TestJobThatKillsItsSupervisorLeavesNoDescendantThatClearedItsEnvironment(t *testing.T) {
	root := runcgrouptest.Root(t)
	dir := t.TempDir()
	script := runcgrouptest.Escapee(t, "escapee") + `
until [ -s escapee ] && [ -e started ]; do sleep 0.01; done
kill -KILL $PPID
exec sleep 1000`
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", script}, Dir: dir, Cgroups: root})
	if err := os.WriteFile(filepath.Join(dir, "started"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	escapee := runcgrouptest.EscapeePid(t, filepath.Join(dir, "escapee"))
	if _, err := wait(t, p); err == nil || !strings.Contains(err.Error(), "signal") {
		t.Fatalf("Wait: %v, want the supervisor's death by a signal", err)
	}
	// gone, not even a zombie: reaped by this process
	if runcgrouptest.Exists(escapee) {
		t.Errorf("pid %d outlived its killed supervisor (state %s, parent %d)", escapee, procState(escapee), ppid(escapee))
	}
	runcgrouptest.RequireEmpty(t, root)
}

// The supervisor's stop reaches every process in the run's cgroup.
func TestStopKillsEveryProcessOfTheRunsCgroup(t *testing.T) {
	root := runcgrouptest.Root(t)
	dir := t.TempDir()
	p := start(t, supervisor.Spec{Args: []string{"sh", "-c", runcgrouptest.Escapee(t, "escapee") + ` exec sleep 1000`}, Dir: dir, Cgroups: root})
	escapee := runcgrouptest.EscapeePid(t, filepath.Join(dir, "escapee"))
	if err := p.Stop(0); err != nil {
		t.Fatal(err)
	}
	_, _ = wait(t, p)
	if runcgrouptest.Exists(escapee) {
		t.Errorf("pid %d outlived the stopped run (state %s)", escapee, procState(escapee))
	}
	runcgrouptest.RequireEmpty(t, root)
}
