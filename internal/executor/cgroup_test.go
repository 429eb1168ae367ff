//go:build linux

package executor_test

// Exec runs in cgroups of their own, and where there are none.

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/executor"
	"github.com/batonhq/baton/internal/runcgroup/runcgrouptest"
)

// A run's command starts a process that leaves its session, renames itself
// and clears its environment (and with it the run's BATON_TREE mark), then
// sleeps: however the run ends, that process ends with it, and the run's
// cgroup is removed.
func TestExecRunsChildThatClearsItsEnvironmentIsKilledWithTheRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  string        // the command's end, once the escapee runs
		stop bool          // the run is cancelled once the escapee runs
		time time.Duration // the job's timeout
	}{
		{name: "the command exits", end: `exit 0`},
		{name: "the run is cancelled", end: `exec sleep 1000`, stop: true},
		{name: "the run times out", end: `exec sleep 1000`, time: 3 * time.Second},
		{name: "the job kills its supervisor", end: `kill -KILL $PPID; exec sleep 1000`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := runcgrouptest.Root(t)
			dir := t.TempDir()
			j := execJob(t, runcgrouptest.Escapee(t, "escapee")+`
until [ -s escapee ]; do sleep 0.01; done
`+tc.end)
			j.Exec.Dir = dir
			j.Timeout = tc.time
			ctx, cancel := context.WithCancel(exCtx(t))
			defer cancel()
			done := execAsync(ctx, exExecutor(executor.WithCgroups(root.Dir())), j, nil)
			escapee := runcgrouptest.EscapeePid(t, filepath.Join(dir, "escapee"))
			if tc.stop {
				cancel()
			}
			if r := await(t, done); tc.time > 0 && !errors.Is(r.err, context.DeadlineExceeded) {
				t.Errorf("Execute = %+v, %v; want DeadlineExceeded", r.res, r.err)
			}
			if runcgrouptest.Alive(escapee) {
				t.Errorf("pid %d, which left its session, renamed itself and cleared its environment, outlived the run", escapee)
			}
			runcgrouptest.RequireEmpty(t, root)
		})
	}
}

// The cgroup of a run of a baton that crashed is removed, what ran in it
// killed, when the next executor is made.
func TestExecRemovesTheCgroupsOfACrashedBaton(t *testing.T) {
	root := runcgrouptest.Root(t)
	dir, escapee := runcgrouptest.Leftover(t, root)
	logs := &records{}
	exExecutor(executor.WithCgroups(root.Dir()), executor.WithLogger(slog.New(logs)))
	if runcgrouptest.Alive(escapee) {
		t.Errorf("pid %d of a crashed baton's run survived the next start", escapee)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the crashed baton's cgroup %s is still there (%v)", dir, err)
	}
	if n := len(logs.matching("baton process that is gone")); n != 1 {
		t.Errorf("%d lines say what was removed; want 1", n)
	}
}
