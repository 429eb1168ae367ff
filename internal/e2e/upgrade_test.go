package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/batonbin"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/releases"
)

// buildRelease builds the baton binary of release version from the
// repository's history into dir: its tree extracted from its commit (git
// archive), built with its own go.mod. The commit must be in the history:
// a shallow clone that has not got it fails, saying so.
func buildRelease(t *testing.T, version, dir string) string {
	t.Helper()
	rel, ok := releases.Find(version)
	if !ok {
		t.Fatalf("release %s is not in internal/releases/releases.txt", version)
	}
	if err := exec.Command("git", "-C", "../..", "cat-file", "-e", rel.Commit+"^{commit}").Run(); err != nil {
		out, _ := exec.Command("git", "-C", "../..", "rev-parse", "--is-shallow-repository").CombinedOutput()
		if strings.TrimSpace(string(out)) == "true" {
			t.Fatalf("release %s's commit %s is not in this shallow clone's history: the upgrade test builds it from there (git fetch --unshallow)",
				version, rel.Commit)
		}
		t.Fatalf("release %s's commit %s is not in the repository's history (%v; git rev-parse --is-shallow-repository: %s)",
			version, rel.Commit, err, bytes.TrimSpace(out))
	}
	src := filepath.Join(dir, "src-"+version)
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("git", "-C", "../..", "archive", rel.Commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	var aerr, terr bytes.Buffer
	archive.Stderr, untar.Stderr = &aerr, &terr
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s: %v: %s", rel.Commit, err, aerr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("tar -x of %s: %v: %s", rel.Commit, err, terr.String())
	}
	bin := filepath.Join(dir, "baton-"+version)
	if err := batonbin.BuildTree(src, bin); err != nil {
		t.Fatalf("building release %s: %v", version, err)
	}
	return bin
}

// hookRecorder is the target of the runtime schedules' http jobs: it appends
// "job tick fence replica" for each request to NAME.out in dir, NAME the
// last segment of the request's path.
type hookRecorder struct {
	dir string
	mu  sync.Mutex
}

func (h *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(h.dir, filepath.Base(r.URL.Path)+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%s %s %s %s\n", r.Header.Get("X-Baton-Job"), r.Header.Get("X-Baton-Tick"),
			r.Header.Get("X-Baton-Fencing-Token"), r.Header.Get("X-Baton-Replica"))
		f.Close()
	}
	w.WriteHeader(http.StatusNoContent)
}

// checkSingletonThroughout reads the singleton's heartbeats: no two of its runs (by
// fence) heartbeat at the same time, and, after its first heartbeat, none
// is missing for longer than a hand-over takes.
func checkSingletonThroughout(t *testing.T, path string, handover time.Duration) {
	t.Helper()
	beats := readBeats(t, path)
	if len(beats) < 10 {
		t.Fatalf("the singleton heartbeat %d times", len(beats))
	}
	sort.Slice(beats, func(i, j int) bool { return beats[i].ns < beats[j].ns })
	last := map[int64]int64{} // fence -> its last beat
	for _, b := range beats {
		last[b.fence] = b.ns
	}
	runs := 1
	for i := 1; i < len(beats); i++ {
		prev, cur := beats[i-1], beats[i]
		if gap := time.Duration(cur.ns - prev.ns); gap > handover {
			t.Errorf("no singleton ran for %v, from %s", gap, time.Unix(0, prev.ns).UTC().Format(time.StampMilli))
		}
		if cur.fence == prev.fence {
			continue
		}
		runs++
		if cur.fence < prev.fence || last[prev.fence] > cur.ns {
			t.Errorf("singleton runs overlapped: fence %d (pid %d) beat at %s, fence %d (pid %d) last at %s",
				cur.fence, cur.pid, time.Unix(0, cur.ns).UTC().Format(time.StampMilli),
				prev.fence, prev.pid, time.Unix(0, last[prev.fence]).UTC().Format(time.StampMilli))
		}
	}
	t.Logf("singleton: %d beats, %d runs", len(beats), runs)
}

// A rolling upgrade from the release the CHANGELOG's Unreleased section
// says this one rolls from: three `baton run` replicas of that release
// (built from its commit) run a cron, a local, a max_runs and a singleton
// job; one at a time each is stopped (SIGTERM) and started again as this
// build; the first new one takes runtime schedules (which the old release
// does not know) and a pause through its HTTP API, resumed after the last
// upgrade; then one replica is taken back to the old release and runs
// beside the new ones. Every tick of every job runs exactly once without a
// gap, max_runs counts across both releases, no tick of the pause runs,
// nothing is archived, dropped or refused, every runtime schedule's ticks
// run once each from its put to the end, and the singleton runs on one
// replica at a time throughout, but for hand-overs.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	t.Parallel() // processes on their own servers, mostly waited for: overlaps the others (TestChaos runs alone)
	if testing.Short() {
		t.Skip("end-to-end")
	}
	changelog, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	from, err := releases.RollsFrom(string(changelog))
	if err != nil {
		t.Fatal(err)
	}
	all := releases.All()
	if prev := all[len(all)-1].Version; prev != from {
		t.Fatalf("CHANGELOG.md's Unreleased section rolls from %s, but the previous release is %s", from, prev)
	}
	dir := t.TempDir()
	built := time.Now()
	old := buildRelease(t, from, dir)
	t.Logf("built %s in %v", from, time.Since(built).Round(100*time.Millisecond))

	srv := redistest.New(t)
	hooks := httptest.NewServer(&hookRecorder{dir: dir})
	defer hooks.Close()
	out := func(n string) string { return filepath.Join(dir, n+".out") }
	const token = "upgrade-test-token-0123456789"
	jobs := tickJob("cron", "", out("cron")) + tickJob("local", "    mode: local\n", out("local")) +
		tickJob("capped", "    max_runs: 12\n", out("capped")) + tickJob("paused", "", out("paused")) + beatJob("single", out("single"))
	// the job list is the same for both releases; the new one's config adds
	// its runtime schedules' http prefix and an HTTP listener per replica
	config := func(name, extra string) string {
		p := filepath.Join(dir, name+".yaml")
		y := fmt.Sprintf("redis:\n  url: redis://%s/0\nlocking:\n  fresh_deployment: true\nnamespace: up\nworker:\n  shutdown_grace: 5s\n%sjobs:\n%s",
			srv.Addr(), extra, jobs)
		if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldCfg := config("old", "http:\n  listen: \"\"\n")
	start := func(name, bin, cfg string) *proc {
		p := &proc{name: name, bin: bin, args: []string{"run", "--config", cfg, "--id", name, "--log-format", "json"}}
		p.start(t, dir)
		return p
	}
	var reps, ran []*proc
	defer func() {
		for _, p := range reps {
			p.signal(syscall.SIGTERM)
		}
		for _, p := range reps {
			p.wait(t, 15*time.Second)
		}
	}()
	for i := range 3 {
		reps = append(reps, start(fmt.Sprintf("old-%d", i), old, oldCfg))
	}
	ran = append(ran, reps...)
	defer func() { logOnFailure(t, dir, ran) }() // every process started, by the end
	awaitStarted(t, dir, reps)
	time.Sleep(3 * time.Second) // real time: the old release runs alone for ticks due by Redis TIME

	stop := func(p *proc) {
		t.Helper()
		p.signal(syscall.SIGTERM)
		p.wait(t, 15*time.Second)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.name, code)
		}
	}
	// the runtime schedules, put through the first new replica
	schedules := []string{"tenant-1", "tenant-2"}
	putAt := map[string]time.Time{}
	var api string
	var pauseAsked, pausedFrom, pausedUntil time.Time
	for i := range reps {
		stop(reps[i])
		addr := redistest.FreeAddr(t)
		cfg := config(fmt.Sprintf("new-%d", i), fmt.Sprintf("http:\n  listen: %s\n  token: %s\nschedules:\n  http_prefixes: [%q]\n",
			addr, token, hooks.URL+"/hooks/"))
		reps[i] = start(fmt.Sprintf("new-%d", i), binary, cfg)
		ran = append(ran, reps[i])
		reps[i].awaitRunning(t, dir)
		switch i {
		case 0:
			api = "http://" + addr
			for _, id := range schedules {
				call(t, http.MethodPut, api+"/api/schedules/"+id, token, fmt.Sprintf(`{"schedule": "@every 1s", "starting_deadline": "30s", "concurrency": "allow", "http": {"method": "POST", "url": %q}}`,
					hooks.URL+"/hooks/"+id))
				putAt[id] = time.Now()
			}
			// a pause a new replica writes, which the old ones' claims read
			pauseAsked = time.Now()
			call(t, http.MethodPost, api+"/api/jobs/paused/pause", token, `{"note": "upgrade"}`)
			pausedFrom = time.Now()
		case 2:
			pausedUntil = time.Now()
			call(t, http.MethodPost, api+"/api/jobs/paused/resume", token, `{}`)
		}
		time.Sleep(3 * time.Second) // real time: old and new side by side while ticks fall due by Redis TIME
	}
	// one replica back to the old release, beside two new ones
	stop(reps[0])
	reps[0] = start("old-0b", old, oldCfg)
	ran = append(ran, reps[0])
	reps[0].awaitRunning(t, dir)
	time.Sleep(4 * time.Second) // real time: the downgraded replica runs beside the new ones
	stopAt := time.Now()
	for _, p := range reps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range reps {
		p.wait(t, 15*time.Second)
	}
	reps = nil

	for _, job := range []string{"cron", "local"} {
		f, l := checkContiguous(t, job, ticksOf(t, out(job)))
		if l-f < 12 {
			t.Errorf("%s ran only %d ticks", job, l-f+1)
		}
	}
	// max_runs counted across both releases: 12 ticks, each once
	if f, l := checkContiguous(t, "capped", ticksOf(t, out("capped"))); l-f+1 != 12 {
		t.Errorf("capped (max_runs 12) ran %d ticks", l-f+1)
	}
	// paused through a new replica from pausedFrom to pausedUntil: no tick
	// of the pause ran on any replica, ticks ran before and after it
	var before, after int
	for sec, n := range ticksOf(t, out("paused")) {
		at := time.Unix(sec, 0)
		switch {
		case n > 1:
			t.Errorf("paused: tick %s ran %d times", at.UTC().Format(time.TimeOnly), n)
		case at.After(pausedFrom.Add(time.Second)) && at.Before(pausedUntil.Add(-time.Second)):
			t.Errorf("paused: tick %s ran while the job was paused (%s to %s)", at.UTC().Format(time.TimeOnly),
				pausedFrom.UTC().Format(time.TimeOnly), pausedUntil.UTC().Format(time.TimeOnly))
		case at.Before(pausedFrom):
			before++
		case at.After(pausedUntil):
			after++
		}
	}
	if before == 0 || after == 0 {
		t.Errorf("paused: %d ticks ran before the pause, %d after the resume", before, after)
	}
	for _, id := range schedules {
		f, l := checkContiguous(t, "@"+id, ticksOf(t, out(id)))
		if first := time.Unix(f, 0); first.After(putAt[id].Add(5 * time.Second)) {
			t.Errorf("@%s: put at %s, first ran the tick of %s", id, putAt[id].UTC().Format(time.TimeOnly), first.UTC().Format(time.TimeOnly))
		}
		if last := time.Unix(l, 0); last.Before(stopAt.Add(-5 * time.Second)) {
			t.Errorf("@%s: the replicas stopped at %s, its last tick run was %s", id, stopAt.UTC().Format(time.TimeOnly), last.UTC().Format(time.TimeOnly))
		}
	}
	checkSingletonThroughout(t, out("single"), 4*time.Second)
	for _, p := range ran {
		b, err := os.ReadFile(filepath.Join(dir, p.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			if pauseRefusal(l, pauseAsked, pausedFrom) {
				continue
			}
			for _, bad := range []string{"archiving a task", "dropping a task", "refusing a task"} {
				if strings.Contains(l, bad) {
					t.Errorf("%s: %s", p.name, strings.TrimSpace(l))
				}
			}
		}
	}
}

// pauseRefusal reports whether log line l is a worker refusing the paused
// job's task because of the pause, for a tick that fell due while the pause
// was being written (asked at asked, answered at from): such a task was
// dispatched before the pause and reached a worker after it, which records
// it and does not run it, as designed.
func pauseRefusal(l string, asked, from time.Time) bool {
	var e struct {
		Message, Job, Reason string
		Tick                 time.Time
	}
	if json.Unmarshal([]byte(l), &e) != nil || !strings.HasPrefix(e.Message, "refusing a task") {
		return false
	}
	return e.Job == "paused" && e.Reason == "paused" &&
		!e.Tick.Before(asked.Add(-2*time.Second)) && !e.Tick.After(from.Add(2*time.Second))
}

// call sends an API request with the token and body to url, and fails
// unless it answers 200. A new replica answers a schedule's put once its
// roster heartbeat shows it can run the schedule (a put no live replica can
// run is refused, 422): retried a while.
func call(t *testing.T, method, url, token, body string) {
	t.Helper()
	var code int
	var got string
	poll.Require(t, 15*time.Second, method+" "+url, func() bool {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got = err.Error()
			return false
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		code, got = resp.StatusCode, b.String()
		return code == http.StatusOK
	})
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, url, code, got)
	}
}
