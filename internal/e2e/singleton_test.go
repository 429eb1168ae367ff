package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// beat is one heartbeat line of the singleton job: "pid fence unix-ns".
type beat struct {
	pid   int
	fence int64
	ns    int64
}

// readBeats parses the heartbeat file; lines cut by a kill are skipped.
func readBeats(t *testing.T, path string) []beat {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		t.Fatal(err)
	}
	var out []beat
	for _, l := range strings.Split(string(data), "\n") {
		fs := strings.Fields(l)
		if len(fs) != 3 {
			continue
		}
		pid, err1 := strconv.Atoi(fs[0])
		fence, err2 := strconv.ParseInt(fs[1], 10, 64)
		ns, err3 := strconv.ParseInt(fs[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, beat{pid, fence, ns})
	}
	return out
}

// waitBeat waits (bounded) for a heartbeat written at or after since with a
// fence above fence, and returns the first such.
func waitBeat(t *testing.T, path string, since time.Time, fence int64, d time.Duration) (beat, bool) {
	t.Helper()
	var found beat
	ok := poll.Until(d, func() bool {
		for _, b := range readBeats(t, path) {
			if b.ns >= since.UnixNano() && b.fence > fence {
				found = b
				return true
			}
		}
		return false
	})
	return found, ok
}

// beatJob is a singleton job entry (lock_ttl 2s) whose child appends a
// heartbeat "pid fence unix-ns" to out every 100 ms.
func beatJob(name, out string) string {
	return fmt.Sprintf(`  - name: %s
    mode: singleton
    lock_ttl: 2s
    restart_backoff:
      initial: 100ms
      max: 1s
    exec:
      command: ["sh", "-c", "while true; do echo \"$$$$ $BATON_FENCING_TOKEN $(date +%%s%%N)\" >> %s; sleep 0.1; done"]
`, name, out)
}

// singletonHolder returns the id of job's leader as `baton status --json`
// reports it, or "" when nobody leads.
func singletonHolder(t *testing.T, cfg, job string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "status", "--json", "--config", cfg)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Logf("baton status: %v: %s", err, errb.String())
		return ""
	}
	var st struct {
		Jobs []struct {
			Name   string
			Leader *struct{ ID string }
		}
	}
	if err := json.Unmarshal(out.Bytes(), &st); err != nil {
		t.Logf("baton status --json: %v: %s", err, out.String())
		return ""
	}
	for _, j := range st.Jobs {
		if j.Name == job && j.Leader != nil {
			return j.Leader.ID
		}
	}
	return ""
}

// currentHolder waits (bounded) until `baton status` names a holder whose
// fence has heartbeat; it returns the replica index.
func currentHolder(t *testing.T, cfg string, reps []*proc) int {
	t.Helper()
	holder := -1
	poll.Require(t, 10*time.Second, "baton status to report the singleton's holder", func() bool {
		id := singletonHolder(t, cfg, "beat")
		holder = slices.IndexFunc(reps, func(p *proc) bool { return id != "" && p.args[4] == id })
		return holder >= 0
	})
	return holder
}

// Three `baton run` replicas share one singleton exec job (lock_ttl 2s). The
// holder is SIGKILLed, SIGSTOPped past its ttl, Redis is paused past the ttl,
// and the holder is SIGTERMed; after each a new term (higher fence) must
// heartbeat, and no two children may ever have heartbeat at the same time.
func TestSingletonFailover(t *testing.T) {
	t.Parallel() // processes on their own servers, mostly waited for: overlaps the others (TestChaos runs alone)
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := redistest.New(t)
	dir := t.TempDir()
	beats := filepath.Join(dir, "beats.out")
	cfg := filepath.Join(dir, "baton.yaml")
	y := fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: e2e-single
http:
  listen: ""
worker:
  shutdown_grace: 5s
jobs:
%s`, srv.Addr(), beatJob("beat", beats))
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	var reps []*proc
	for i := range 3 {
		p := &proc{name: fmt.Sprintf("single-%d", i), args: []string{"run", "--config", cfg, "--id", fmt.Sprintf("r%d", i), "--log-format", "json"}}
		p.start(t, dir)
		reps = append(reps, p)
	}
	stopped := false
	defer func() {
		for _, p := range reps {
			p.signal(syscall.SIGCONT)
			p.signal(syscall.SIGTERM)
		}
		for _, p := range reps {
			if !stopped {
				p.wait(t, 15*time.Second)
			}
		}
	}()

	first, ok := waitBeat(t, beats, time.Time{}, 0, 15*time.Second)
	if !ok {
		t.Fatal("the singleton never heartbeat")
	}
	if first.pid <= 1 {
		t.Fatalf("heartbeat pid %d: the $$$$ escape did not give the shell's pid", first.pid)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", first.pid)); err != nil && isLinux() {
		t.Errorf("heartbeat pid %d is not a live process: %v", first.pid, err)
	}
	fence := first.fence
	var stopFence int64
	var contAt time.Time

	step := func(name string, do func() (cleanup func())) {
		t.Helper()
		before := readBeats(t, beats)
		if len(before) > 0 {
			fence = max(fence, before[len(before)-1].fence)
		}
		at := time.Now()
		cleanup := do()
		b, ok := waitBeat(t, beats, at, fence, 15*time.Second)
		if cleanup != nil {
			cleanup()
		}
		if !ok {
			t.Fatalf("%s: no heartbeat with a fence above %d within 15s", name, fence)
		}
		t.Logf("%s: fence %d -> %d (pid %d) after %v", name, fence, b.fence, b.pid, time.Unix(0, b.ns).Sub(at).Round(time.Millisecond))
		fence = b.fence
	}

	step("SIGKILL holder", func() func() {
		p := reps[currentHolder(t, cfg, reps)]
		p.signal(syscall.SIGKILL)
		p.wait(t, 5*time.Second)
		return func() { p.start(t, dir) }
	})
	step("SIGSTOP holder 4s", func() func() {
		p := reps[currentHolder(t, cfg, reps)]
		bs := readBeats(t, beats)
		stopFence = bs[len(bs)-1].fence
		p.signal(syscall.SIGSTOP)
		time.Sleep(4 * time.Second) // real time: frozen past the 2s lock_ttl, which the masters' clocks end
		p.signal(syscall.SIGCONT)
		contAt = time.Now()
		return nil
	})
	step("Redis paused 3s", func() func() {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second) // real time: Redis paused past the 2s lock_ttl; the lease ends by the masters' clocks
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		return nil
	})
	step("SIGTERM holder", func() func() {
		p := reps[currentHolder(t, cfg, reps)]
		p.signal(syscall.SIGTERM)
		p.wait(t, 15*time.Second)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.name, code)
		}
		return func() { p.start(t, dir) }
	})
	time.Sleep(500 * time.Millisecond) // real time: the new holder's child beats (every 100ms) a few times before all stop
	for _, p := range reps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range reps {
		p.wait(t, 15*time.Second)
	}
	stopped = true

	checkSingleton(t, readBeats(t, beats), stopFence, contAt)
}

func isLinux() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// checkSingleton asserts the children's heartbeat intervals never overlap,
// fences never go back, and the SIGSTOPped holder's child stopped before the
// baton process was continued and before the next term began.
func checkSingleton(t *testing.T, bs []beat, stopFence int64, contAt time.Time) {
	t.Helper()
	type interval struct {
		pid        int
		fence      int64
		start, end int64
		n          int
	}
	by := map[[2]int64]*interval{}
	for _, b := range bs {
		k := [2]int64{int64(b.pid), b.fence}
		iv := by[k]
		if iv == nil {
			iv = &interval{pid: b.pid, fence: b.fence, start: b.ns, end: b.ns}
			by[k] = iv
		}
		iv.start, iv.end = min(iv.start, b.ns), max(iv.end, b.ns)
		iv.n++
	}
	var list []*interval
	for _, iv := range by {
		list = append(list, iv)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
	for _, iv := range list {
		t.Logf("child pid %d fence %d: %d heartbeats, %s .. %s", iv.pid, iv.fence, iv.n,
			time.Unix(0, iv.start).Format("15:04:05.000"), time.Unix(0, iv.end).Format("15:04:05.000"))
	}
	terms := 0
	for i, cur := range list {
		if i == 0 {
			terms++
			continue
		}
		prev := list[i-1]
		if cur.start <= prev.end {
			t.Errorf("overlap: pid %d (fence %d) started %v before pid %d (fence %d) stopped",
				cur.pid, cur.fence, time.Duration(prev.end-cur.start), prev.pid, prev.fence)
		}
		if cur.fence < prev.fence {
			t.Errorf("fence went back: pid %d fence %d after pid %d fence %d", cur.pid, cur.fence, prev.pid, prev.fence)
		}
		if cur.fence != prev.fence {
			terms++
		}
	}
	if terms < 5 {
		t.Errorf("saw %d terms, want >= 5 (first + one per fault)", terms)
	}
	// The SIGSTOPped holder's child: killed by its supervisor while baton was
	// frozen, before the next term's first heartbeat.
	var stoppedEnd, nextStart int64
	for _, iv := range list {
		if iv.fence == stopFence {
			stoppedEnd = max(stoppedEnd, iv.end)
		}
		if iv.fence > stopFence && (nextStart == 0 || iv.start < nextStart) {
			nextStart = iv.start
		}
	}
	switch {
	case stoppedEnd == 0 || nextStart == 0:
		t.Errorf("SIGSTOP step: fence %d or its successor never heartbeat", stopFence)
	case stoppedEnd >= nextStart:
		t.Errorf("SIGSTOP step: frozen holder's child (fence %d) heartbeat until %v after the next term started", stopFence, time.Duration(stoppedEnd-nextStart))
	case stoppedEnd >= contAt.UnixNano():
		t.Errorf("SIGSTOP step: frozen holder's child (fence %d) still ran when baton was continued", stopFence)
	default:
		t.Logf("SIGSTOP step: child of fence %d stopped %v before the next term's first heartbeat",
			stopFence, time.Duration(nextStart-stoppedEnd).Round(time.Millisecond))
	}
	t.Logf("%d heartbeats, %d child processes, %d terms, no overlap", len(bs), len(list), terms)
}
