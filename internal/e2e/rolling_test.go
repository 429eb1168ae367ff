package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
)

// tickJob is a job entry that appends "job tick fence replica" to out at
// every run (one write).
func tickJob(name, extra, out string) string {
	return fmt.Sprintf(`  - name: %s
    schedule: "@every 1s"
    starting_deadline: 30s
    concurrency: allow
%s    exec:
      command: ["sh", "-c", "echo \"$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN $BATON_REPLICA\" >> %s"]
`, name, extra, out)
}

// ticksOf reads the ticks written by tickJob to the given files, by unix
// second, with how often each ran.
func ticksOf(t *testing.T, paths ...string) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			f := strings.Fields(l)
			if len(f) != 4 {
				continue
			}
			at, err := time.Parse(time.RFC3339, f[1])
			if err != nil {
				continue
			}
			out[at.Unix()]++
		}
	}
	return out
}

// checkContiguous fails unless every second from the first tick to the last
// ran exactly once, and returns the range.
func checkContiguous(t *testing.T, job string, ticks map[int64]int) (first, last int64) {
	t.Helper()
	var secs []int64
	for s, n := range ticks {
		secs = append(secs, s)
		if n > 1 {
			t.Errorf("%s: tick %s ran %d times", job, time.Unix(s, 0).UTC().Format(time.RFC3339), n)
		}
	}
	if len(secs) == 0 {
		t.Errorf("%s: no tick ran", job)
		return 0, 0
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
	for i := 1; i < len(secs); i++ {
		if secs[i] != secs[i-1]+1 {
			t.Errorf("%s: no run of the ticks between %s and %s", job, time.Unix(secs[i-1], 0).UTC().Format(time.RFC3339),
				time.Unix(secs[i], 0).UTC().Format(time.RFC3339))
		}
	}
	return secs[0], secs[len(secs)-1]
}

// A rolling deploy of three `baton run` replicas: each in turn is stopped
// (SIGTERM) and started again with the new job list, which adds a job,
// removes one, changes one's command and moves one to another queue. Every
// tick of every job in the window runs exactly once, without a gap, while
// old and new replicas run side by side.
func TestRollingDeployOfThree(t *testing.T) {
	t.Parallel() // processes on their own servers, mostly waited for: overlaps the others (TestChaos runs alone)
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := redistest.New(t)
	dir := t.TempDir()
	out := func(n string) string { return filepath.Join(dir, n+".out") }
	head := func(queues string) string {
		return fmt.Sprintf("redis:\n  url: redis://%s/0\nlocking:\n  fresh_deployment: true\nnamespace: roll\nworker:\n  shutdown_grace: 5s\n  queues: %s\njobs:\n",
			srv.Addr(), queues)
	}
	oldCfg, newCfg := filepath.Join(dir, "old.yaml"), filepath.Join(dir, "new.yaml")
	if err := os.WriteFile(oldCfg, []byte(head("{default: 1, q1: 1}")+
		tickJob("kept", "", out("kept"))+tickJob("removed", "", out("removed"))+
		tickJob("changed", "", out("changed-old"))+tickJob("moved", "    queue: q1\n", out("moved"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(newCfg, []byte(head("{default: 1, q1: 1, q2: 1}")+
		tickJob("kept", "", out("kept"))+tickJob("added", "", out("added"))+
		tickJob("changed", "", out("changed-new"))+tickJob("moved", "    queue: q2\n", out("moved"))), 0o644); err != nil {
		t.Fatal(err)
	}
	var reps []*proc
	var lastOldStop time.Time
	for i := range 3 {
		p := &proc{name: fmt.Sprintf("old-%d", i), args: []string{"run", "--config", oldCfg, "--id", fmt.Sprintf("old-%d", i), "--log-format", "json"}}
		p.start(t, dir)
		reps = append(reps, p)
	}
	time.Sleep(3 * time.Second) // real time: the old list runs alone
	for i := range reps {
		lastOldStop = time.Now()
		reps[i].signal(syscall.SIGTERM)
		reps[i].wait(t, 15*time.Second)
		if code := reps[i].cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", reps[i].name, code)
		}
		p := &proc{name: fmt.Sprintf("new-%d", i), args: []string{"run", "--config", newCfg, "--id", fmt.Sprintf("new-%d", i), "--log-format", "json"}}
		p.start(t, dir)
		reps[i] = p
		time.Sleep(3 * time.Second) // real time: old and new side by side while ticks fall due by Redis TIME
	}
	time.Sleep(2 * time.Second) // real time: the new list runs alone for two ticks
	for _, p := range reps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range reps {
		p.wait(t, 15*time.Second)
	}

	kf, kl := checkContiguous(t, "kept", ticksOf(t, out("kept")))
	checkContiguous(t, "changed", ticksOf(t, out("changed-old"), out("changed-new")))
	checkContiguous(t, "moved", ticksOf(t, out("moved")))
	af, _ := checkContiguous(t, "added", ticksOf(t, out("added")))
	// a removed job's tasks that only new workers fetched after its last
	// replica left are archived, each with a line: they count as decided
	removed := ticksOf(t, out("removed"))
	for _, name := range []string{"new-0", "new-1", "new-2"} {
		b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
		for l := range strings.Lines(string(b)) {
			if !strings.Contains(l, "archiving a task no live replica can run") || !strings.Contains(l, `"job":"removed"`) {
				continue
			}
			if i := strings.Index(l, `"tick":"`); i >= 0 {
				if at, err := time.Parse(time.RFC3339, l[i+8:i+8+20]); err == nil {
					if removed[at.Unix()] > 0 {
						t.Errorf("removed@%s ran and was archived", at.Format(time.RFC3339))
					}
					removed[at.Unix()]++
					if at.Before(lastOldStop.Add(-10 * time.Second)) {
						t.Errorf("removed@%s archived while its replicas ran", at.Format(time.RFC3339))
					}
				}
			}
		}
	}
	_, rl := checkContiguous(t, "removed", removed)
	t.Logf("kept ran %d ticks; added from %s; removed until %s", kl-kf+1,
		time.Unix(af, 0).UTC().Format(time.TimeOnly), time.Unix(rl, 0).UTC().Format(time.TimeOnly))
	if kl-kf < 12 {
		t.Errorf("kept ran only %d ticks", kl-kf+1)
	}
	// the removed job ran until its last replica left, the added one from
	// its first replica on: they overlapped, so tasks were handed around
	if rl+3 < af {
		t.Errorf("removed ended (%d) before added began (%d): no overlap tested", rl, af)
	}
	for _, name := range []string{"old-0", "old-1", "old-2", "new-0", "new-1", "new-2"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "dropping a task") {
			t.Errorf("%s dropped a task", name)
		}
		if t.Failed() {
			for l := range strings.Lines(string(b)) {
				if strings.Contains(l, `"removed"`) && !strings.Contains(l, "run started") && !strings.Contains(l, "run succeeded") {
					t.Logf("%s: %s", name, strings.TrimSpace(l))
				}
			}
		}
	}
}

// One of two replicas loses its link to Redis (through a proxy the test
// cuts) for longer than a tick lease while a local and a queued job run,
// then gets it back. The other replica runs every tick meanwhile; the cut
// one holds its ticks back and claims them when Redis answers again, finding
// them done. Every tick runs exactly once, without a gap.
func TestLinkCutAndRestored(t *testing.T) {
	t.Parallel() // processes on their own servers, mostly waited for: overlaps the others (TestChaos runs alone)
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := redistest.New(t)
	px := redistest.NewTestProxy(t, srv.Addr())
	dir := t.TempDir()
	out := func(n string) string { return filepath.Join(dir, n+".out") }
	jobs := tickJob("queued", "", out("queued")) + tickJob("local", "    mode: local\n", out("local"))
	cfg := func(name, addr string) string {
		p := filepath.Join(dir, name+".yaml")
		y := fmt.Sprintf("redis:\n  url: redis://%s/0\nlocking:\n  fresh_deployment: true\nnamespace: cut\nworker:\n  shutdown_grace: 5s\njobs:\n%s", addr, jobs)
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	direct := &proc{name: "direct", args: []string{"run", "--config", cfg("direct", srv.Addr()), "--id", "direct", "--log-format", "json"}}
	cut := &proc{name: "cut", args: []string{"run", "--config", cfg("cut", px.Addr()), "--id", "cut", "--log-format", "json"}}
	direct.start(t, dir)
	cut.start(t, dir)
	time.Sleep(4 * time.Second) // real time: both run
	if err := px.Cut(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(7 * time.Second) // real time: longer than the 5s tick lease, which the masters' clocks end
	if err := px.Restore(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // real time: ticks after the restore, as the masters' clocks decide
	for _, p := range []*proc{direct, cut} {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range []*proc{direct, cut} {
		p.wait(t, 20*time.Second)
	}
	for _, job := range []string{"queued", "local"} {
		f, l := checkContiguous(t, job, ticksOf(t, out(job)))
		if l-f < 14 {
			t.Errorf("%s ran only %d ticks", job, l-f+1)
		}
	}
	if t.Failed() {
		for _, name := range []string{"direct", "cut"} {
			b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
			for l := range strings.Lines(string(b)) {
				if strings.Contains(l, `"queued"`) && !strings.Contains(l, "run started") && !strings.Contains(l, "run succeeded") || strings.Contains(l, "error") {
					t.Logf("%s: %s", name, strings.TrimSpace(l))
				}
			}
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "cut.log"))
	if !strings.Contains(string(b), "holding ticks back") {
		t.Errorf("the cut replica did not hold its ticks back:\n%s", b)
	}
}
