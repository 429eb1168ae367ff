package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/histcheck"
	"github.com/batonhq/baton/internal/redistest"
)

// rollingConfigs writes the job lists of a rolling deploy, before and after:
// kept (in both), removed (old only), added (new only), changed (its
// command differs) and moved (queue q1 in the old list, q2 in the new one,
// whose workers still drain q1, as the README says to do). The jobs allow
// overlap: a handed-back tick runs a second or two late, and under forbid
// two late ticks released together would skip one another by design.
func rollingConfigs(t *testing.T, dir string, srv *redistest.Server) (oldCfg, newCfg string, out func(string) string) {
	t.Helper()
	out = func(name string) string { return filepath.Join(dir, name+".out") }
	job := func(name, extra string, file string) string {
		return fmt.Sprintf(`  - name: %s
    schedule: "@every 1s"
    starting_deadline: 30s
    concurrency: allow
%s    exec:
      command: %s
`, name, extra, tickCommand(out(file)))
	}
	head := func(queues string) string {
		return fmt.Sprintf("redis:\n  url: %s\nlocking:\n  fresh_deployment: true\nworker:\n  shutdown_grace: 5s\n  queues: %s\njobs:\n", redisURL(srv), queues)
	}
	oldCfg, newCfg = filepath.Join(dir, "old.yaml"), filepath.Join(dir, "new.yaml")
	if err := writeFile(oldCfg, head("{default: 1, q1: 1}")+
		job("kept", "", "kept")+job("removed", "", "removed")+
		job("changed", "", "changed-old")+job("moved", "    queue: q1\n", "moved")); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(newCfg, head("{default: 1, q1: 1, q2: 1}")+
		job("kept", "", "kept")+job("added", "", "added")+
		job("changed", "", "changed-new")+job("moved", "    queue: q2\n", "moved")); err != nil {
		t.Fatal(err)
	}
	return oldCfg, newCfg, out
}

// TestRollingDeployEveryTickOnce runs a replica with the old job list and
// one with the new list side by side, as a rolling deploy does: every tick
// of every job in the window runs exactly once, with no gap, whichever
// replica dispatched it and whichever worker fetched its task first.
func TestRollingDeployEveryTickOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	oldCfg, newCfg, out := rollingConfigs(t, dir, srv)

	oldP := start(t, nil, "run", "--config", oldCfg, "--id", "old")
	waitRunning(t, 15*time.Second, "the old replica's first ticks", func() bool { return len(readTicks(t, out("kept"))) >= 2 }, oldP)
	newP := start(t, nil, "run", "--config", newCfg, "--id", "new")
	waitRunning(t, 20*time.Second, "6 ticks of the added job", func() bool { return len(readTicks(t, out("added"))) >= 6 }, oldP, newP)

	code, status, errs := runIn("status", "--config", newCfg)
	if code != 0 || !strings.Contains(status, "live replicas run different job lists") ||
		!strings.Contains(status, `"added": absent on "old"`) || !strings.Contains(status, `"removed": absent on "new"`) ||
		!strings.Contains(status, `"moved": "cron q1`) {
		t.Errorf("status during the deploy: %d\n%s%s", code, status, errs)
	}
	oldStop := time.Now()
	signalAndWait(t, oldP, syscall.SIGTERM, 0)
	n := len(readTicks(t, out("kept")))
	waitRunning(t, 15*time.Second, "the new replica alone for 2 ticks", func() bool { return len(readTicks(t, out("kept"))) >= n+2 }, newP)
	signalAndWait(t, newP, syscall.SIGTERM, 0)

	logs := oldP.stderr.String() + newP.stderr.String()
	for _, job := range []string{"kept", "added", "changed", "moved", "removed"} {
		var lines []tickLine
		for _, f := range []string{job, job + "-old", job + "-new"} {
			lines = append(lines, readTicks(t, out(f))...)
		}
		// the history checker judges the job's window: every tick ran once,
		// or (the removed job's last ones) was archived with a reason
		h := histcheck.New()
		var ticks []time.Time
		for _, l := range lines {
			at, err := time.Parse(time.RFC3339, l.tick)
			if err != nil {
				t.Fatal(err)
			}
			ticks = append(ticks, at)
			h.Ticked(histcheck.Tick{Job: job, Tick: at, Event: "dispatched", Replica: "a run"})
		}
		if job == "removed" {
			// its tasks that only the new worker fetched after the old
			// replica left are archived, each with a line: decided too
			for l := range strings.Lines(newP.stderr.String()) {
				if !strings.Contains(l, "archiving a task no live replica can run") || !strings.Contains(l, `"job":"removed"`) {
					continue
				}
				if i := strings.Index(l, `"tick":"`); i >= 0 {
					if at, err := time.Parse(time.RFC3339, l[i+8:i+8+20]); err == nil {
						if at.Before(oldStop.Add(-10 * time.Second)) {
							t.Errorf("removed@%s archived while the old replica ran", at.Format(time.RFC3339))
						}
						ticks = append(ticks, at)
						h.Ticked(histcheck.Tick{Job: job, Tick: at, Event: "missed", Replica: "new", Reason: "archived: no live replica can run it"})
					}
				}
			}
		}
		slices.SortFunc(ticks, func(a, b time.Time) int { return a.Compare(b) })
		if len(ticks) < 3 {
			t.Errorf("%s: %d ticks ran", job, len(ticks))
			continue
		}
		for at := ticks[0]; !at.After(ticks[len(ticks)-1]); at = at.Add(time.Second) {
			h.Ticked(histcheck.Tick{Job: job, Tick: at, Event: "expected"})
		}
		if err := h.Check(); err != nil {
			t.Errorf("%s: %v", job, err)
		}
	}
	if t.Failed() {
		t.Logf("logs:\n%s", logs)
	}
	// each list's own ticks were handed to the replica that could run them:
	// tasks of added and removed are fetched by either worker at random, so
	// over a dozen ticks some went to the wrong one first
	if !strings.Contains(logs, "handing tasks of a job this replica cannot run back") {
		t.Errorf("no task was handed back:\n%s", logs)
	}
	// only the removed job may lose a task, and only its last ticks: after
	// the old replica is gone no live replica runs it
	for l := range strings.Lines(logs) {
		if strings.Contains(l, "dropping a task") ||
			strings.Contains(l, "archiving a task no live replica can run") && !strings.Contains(l, `"job":"removed"`) {
			t.Errorf("a task was dropped: %s", l)
		}
	}
}
