// Package e2e runs the baton binary as real processes against a real
// redis-server: several schedulers and workers, killed and restarted while
// jobs run, and checks from the jobs' own output that every tick ran once.
package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"go.uber.org/goleak"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/batonbin"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// binary is the baton binary built once by TestMain, as a release is.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "baton-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if binary, err = batonbin.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(redistest.GoleakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// proc is one baton process.
type proc struct {
	name string
	args []string
	// bin is the binary it runs; empty: the one TestMain built
	bin  string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	// starts is how many times the log said "replica started" before the
	// last start
	starts int
}

// startedLine is what a replica logs once it runs (its signal handler
// installed: SIGTERM from then on is a graceful stop).
const startedLine = `"message":"replica started"`

// awaitRunning waits, at most a minute, until p's last start has logged
// that its replica runs: a process stopped before then dies of the signal.
func (p *proc) awaitRunning(t *testing.T, dir string) {
	t.Helper()
	poll.Require(t, time.Minute, p.name+" to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, p.name+".log"))
		return strings.Count(string(b), startedLine) > p.starts
	})
}

func (p *proc) start(t *testing.T, dir string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, p.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.log = f
	b, _ := os.ReadFile(f.Name())
	p.starts = strings.Count(string(b), startedLine)
	bin := binary
	if p.bin != "" {
		bin = p.bin
	}
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.done = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.done) }()
}

func (p *proc) signal(sig syscall.Signal) {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// wait waits for the process to exit, bounded; a process that does not is killed.
func (p *proc) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Errorf("%s did not exit within %v; killing it", p.name, d)
		p.signal(syscall.SIGKILL)
		<-p.done
	}
	p.log.Close()
}

// logOnFailure logs the last lines of each process's log at the end of a
// failed test.
func logOnFailure(t *testing.T, dir string, procs []*proc) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, p := range procs {
			b, _ := os.ReadFile(filepath.Join(dir, p.name+".log"))
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("%s, last lines:\n%s", p.name, strings.Join(lines[max(0, len(lines)-12):], "\n"))
		}
	})
}

// awaitStarted waits until every process has logged that its replica
// started (at most a minute: processes start slowly on a busy host), and
// returns the first whole second after: the first tick the processes all
// see coming. A tick due before a replica ever ran is not one baton owes.
func awaitStarted(t *testing.T, dir string, procs []*proc) time.Time {
	t.Helper()
	for _, p := range procs {
		p.awaitRunning(t, dir)
	}
	return time.Now().Add(time.Second).Truncate(time.Second)
}

// logTick logs what every process logged about job's tick.
func logTick(t *testing.T, dir string, procs []*proc, job string, tick time.Time) {
	t.Helper()
	key := `"job":"` + job + `","tick":"` + tick.UTC().Format(time.RFC3339) + `"`
	for _, p := range procs {
		b, _ := os.ReadFile(filepath.Join(dir, p.name+".log"))
		for l := range strings.Lines(string(b)) {
			if strings.Contains(l, key) || strings.Contains(l, job+"@"+tick.UTC().Format(time.RFC3339)) {
				t.Logf("%s: %s", p.name, strings.TrimSpace(l))
			}
		}
	}
}

func writeConfig(t *testing.T, dir, redisAddr string) (cfg, once, forbid string) {
	once = filepath.Join(dir, "once.out")
	forbid = filepath.Join(dir, "forbid.out")
	cfg = filepath.Join(dir, "baton.yaml")
	y := fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: e2e
worker:
  concurrency: 20
  shutdown_grace: 5s
jobs:
  - name: every-second
    schedule: "@every 1s"
    starting_deadline: 20s
    exec:
      command: ["sh", "-c", "echo \"$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN start\" >> %[2]s; echo \"$BATON_JOB $BATON_TICK $BATON_FENCING_TOKEN end\" >> %[2]s"]
  - name: slow-forbid
    schedule: "@every 1s"
    starting_deadline: 20s
    concurrency: forbid
    lock_ttl: 2s
    exec:
      command: ["sh", "-c", "echo \"start $BATON_TICK $BATON_FENCING_TOKEN $(date +%%s%%N)\" >> %[3]s; sleep 1.5; echo \"end $BATON_TICK $BATON_FENCING_TOKEN $(date +%%s%%N)\" >> %[3]s"]
`, redisAddr, once, forbid)
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, once, forbid
}

type line struct {
	tick  time.Time
	fence int64
	what  string
}

// readRuns parses "job tick fence start|end" lines.
func readRuns(t *testing.T, path string) []line {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue // a line cut by a kill
		}
		tick, err1 := time.Parse(time.RFC3339, fs[1])
		fence, err2 := strconv.ParseInt(fs[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, line{tick, fence, fs[3]})
	}
	return out
}

// seen counts the start and end lines of one tick.
type seen struct{ starts, ends int }

// startsOf reads the start and end lines in once, by tick (unix seconds);
// none before the first run.
func startsOf(t *testing.T, once string) map[int64]*seen {
	t.Helper()
	per := map[int64]*seen{}
	if _, err := os.Stat(once); err != nil {
		return per
	}
	for _, r := range readRuns(t, once) {
		s := per[r.tick.Unix()]
		if s == nil {
			s = &seen{}
			per[r.tick.Unix()] = s
		}
		if r.what == "start" {
			s.starts++
		} else {
			s.ends++
		}
	}
	return per
}

// behindAnotherRun reads the every-second ticks of namespace ns that the
// history records skipped because the run of another tick held the job
// (forbid): a run that outlasts a second on a busy host, or a tick
// dispatched late (its scheduler killed) that found the next tick's run
// started first. By tick (unix seconds), the reason.
func behindAnotherRun(t *testing.T, rdb *redis.Client, ns string) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	recs, err := history.Read(context.Background(), rdb, ns, "every-second", 0)
	if err != nil {
		t.Logf("reading the history: %v", err)
	}
	for _, r := range recs {
		m := holderRe.FindStringSubmatch(r.Reason)
		if r.Status != jobs.StatusSkipped || !r.Started.IsZero() || m == nil {
			continue
		}
		if held, err := time.Parse(time.RFC3339, m[1]); err == nil && !held.Equal(r.Tick) {
			out[r.Tick.Unix()] = "skipped: " + r.Reason
		}
	}
	return out
}

// holderRe reads a forbid skip's reason: the holder's tick and replica.
var holderRe = regexp.MustCompile(`^another run holds the job: every-second@(\S+) run=\S+ attempt=\d+ on (\S+)(?: \(.*\))?$`)

// awaitStarts waits, at most bound, until every every-second tick of
// [from, until] has a start line in once. The runs are other processes'
// (read once a second); a tick that never starts is reported by the caller.
// A tick in skipped (if not nil) needs no start.
func awaitStarts(t *testing.T, once string, from, until time.Time, bound time.Duration, skipped func() map[int64]string) {
	t.Helper()
	for end := time.Now().Add(bound); time.Now().Before(end); time.Sleep(time.Second) { // real time: the runs are other processes', due by Redis TIME; read once a second
		started, all := startsOf(t, once), true
		skips := map[int64]string{}
		if skipped != nil {
			skips = skipped()
		}
		for tick := from; !tick.After(until) && all; tick = tick.Add(time.Second) {
			all = started[tick.Unix()] != nil || skips[tick.Unix()] != ""
		}
		if all {
			return
		}
	}
}

// checkForbid asserts the slow forbid job never overlapped itself and its
// fences only grew. A run with a start line and no end line (but the
// last) was killed, its lease lost on a starved host: killed before the
// lease's validity deadline, which this file cannot tell, so its overlap
// with the next run is left to G3's tests; at least three pairs of runs
// are checked.
func checkForbid(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type run struct {
		start, end int64
		fence      int64
		tick       string
	}
	runs := map[string]*run{}
	for _, l := range strings.Split(string(data), "\n") {
		fs := strings.Fields(l)
		if len(fs) != 4 {
			continue
		}
		fence, _ := strconv.ParseInt(fs[2], 10, 64)
		ns, _ := strconv.ParseInt(fs[3], 10, 64)
		key := fs[1] + "/" + fs[2]
		r := runs[key]
		if r == nil {
			r = &run{fence: fence, tick: fs[1]}
			runs[key] = r
		}
		if fs[0] == "start" {
			r.start = ns
		} else {
			r.end = ns
		}
	}
	var list []*run
	for _, r := range runs {
		if r.start > 0 {
			list = append(list, r)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].start < list[j].start })
	killed := 0
	for i := 1; i < len(list); i++ {
		prev, cur := list[i-1], list[i]
		switch {
		case prev.end == 0:
			// killed: its lease lost (a starved host), it was killed
			// before the lease's validity deadline, which this file
			// cannot tell; the lost lease's kill is G3's tests' to check
			killed++
			t.Logf("run of %s (fence %d) has no end line: killed", prev.tick, prev.fence)
		case cur.start < prev.end:
			t.Errorf("forbid job overlapped: run of %s (fence %d) started before run of %s (fence %d) ended", cur.tick, cur.fence, prev.tick, prev.fence)
		}
		if cur.fence <= prev.fence {
			t.Errorf("forbid job fence %d (tick %s) not above %d (tick %s)", cur.fence, cur.tick, prev.fence, prev.tick)
		}
	}
	if checked := len(list) - 1 - killed; checked < 3 {
		t.Errorf("the slow forbid job's overlap checked between %d pairs of runs only (%d of %d runs killed)", checked, killed, len(list))
	}
	t.Logf("slow forbid job: %d runs, none overlapping (%d killed)", len(list), killed)
}

// Phase 1: 3 schedulers and 2 workers; schedulers are SIGKILLed and
// restarted at random (never all at once). Every tick in the window runs
// exactly once (or, the job forbidding overlap, is skipped and recorded so
// while an earlier tick's run still holds it: a run that outlasts a second
// on a busy host), fences never repeat, and the forbid job never overlaps.
func TestSchedulersKilledEveryTickOnce(t *testing.T) {
	t.Parallel() // processes on their own servers, mostly waited for: overlaps the others (TestChaos runs alone)
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := redistest.New(t)
	dir := t.TempDir()
	cfg, once, forbid := writeConfig(t, dir, srv.Addr())

	var scheds, workers []*proc
	for i := range 3 {
		p := &proc{name: fmt.Sprintf("scheduler-%d", i), args: []string{"scheduler", "--config", cfg, "--id", fmt.Sprintf("s%d", i), "--log-format", "json"}}
		p.start(t, dir)
		scheds = append(scheds, p)
	}
	for i := range 2 {
		p := &proc{name: fmt.Sprintf("worker-%d", i), args: []string{"worker", "--config", cfg, "--id", fmt.Sprintf("w%d", i), "--log-format", "json"}}
		p.start(t, dir)
		workers = append(workers, p)
	}
	logOnFailure(t, dir, append(scheds, workers...))
	windowStart := awaitStarted(t, dir, append(scheds, workers...))
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	kills := 0
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		time.Sleep(time.Duration(1500+rng.IntN(1500)) * time.Millisecond) // real time: a scheduler process runs for its share of ticks between kills
		p := scheds[rng.IntN(len(scheds))]
		p.signal(syscall.SIGKILL)
		p.wait(t, 5*time.Second)
		kills++
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond) // real time: a killed process stays down a while; its 5s tick leases run on the masters' clocks
		p.start(t, dir)
	}
	windowEnd := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	// the window's last ticks start: one owned by a replica killed at the
	// end is claimed again when its 5 s tick lease expires, one whose worker
	// was killed with the task is recovered at asynq's lease (30 s)
	rdb := srv.TestClient(t)
	skipped := func() map[int64]string { return behindAnotherRun(t, rdb, "e2e") }
	awaitStarts(t, once, windowStart, windowEnd, time.Minute, skipped)
	for _, p := range scheds {
		p.awaitRunning(t, dir) // one restarted at the end may still be starting
	}
	for _, p := range append(scheds, workers...) {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range append(scheds, workers...) {
		p.wait(t, 15*time.Second)
		if code := p.cmd.ProcessState.ExitCode(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", p.name, code)
		}
	}

	runs := readRuns(t, once)
	starts := map[int64]int{} // by tick, unix seconds
	fences := map[int64]time.Time{}
	for _, r := range runs {
		if r.what != "start" {
			continue
		}
		starts[r.tick.Unix()]++
		if other, dup := fences[r.fence]; dup && !other.Equal(r.tick) {
			t.Errorf("fence %d used by ticks %v and %v", r.fence, other, r.tick)
		}
		fences[r.fence] = r.tick
	}
	missing, dups, skips := 0, 0, skipped()
	for tick := windowStart; !tick.After(windowEnd); tick = tick.Add(time.Second) {
		switch n := starts[tick.Unix()]; {
		case n == 0 && skips[tick.Unix()] != "":
			t.Logf("tick %v %s", tick.Format(time.RFC3339), skips[tick.Unix()])
		case n == 0:
			missing++
			t.Errorf("tick %v never ran", tick.Format(time.RFC3339))
			logTick(t, dir, append(scheds, workers...), "every-second", tick)
		case n > 1:
			dups++
			t.Errorf("tick %v ran %d times", tick.Format(time.RFC3339), n)
		}
	}
	t.Logf("%d scheduler kills; window %v..%v: %d ticks, %d missing, %d duplicated",
		kills, windowStart.Format(time.TimeOnly), windowEnd.Format(time.TimeOnly),
		int(windowEnd.Sub(windowStart)/time.Second)+1, missing, dups)
	checkForbid(t, forbid)
}

// Phase 2: 3 `baton run` replicas (scheduler and worker in one) are
// SIGKILLed and restarted. No tick is missed; a tick may run twice only if
// its first run was cut off by a kill (it has a start and no end), which
// is asynq's at-least-once execution. A replica killed while it runs the
// job leaves the job's execution lease held until its lock_ttl: the job
// forbids overlap, so the ticks due meanwhile are skipped, and recorded so
// (the lease cannot tell a dead holder from a slow one).
// killedTaskRecovery bounds how long a tick waits when its worker was
// killed after taking its task: asynq's lease and recovery scan
// (handoff.AttemptSlack), then the first retry's backoff (retry_backoff's
// default, 10 s).
var killedTaskRecovery = handoff.AttemptSlack + handoff.BackoffDelay(10*time.Second, 0)

func TestRunReplicasKilledNoTickMissed(t *testing.T) {
	t.Parallel() // processes on their own servers, mostly waited for: overlaps the others (TestChaos runs alone)
	if testing.Short() {
		t.Skip("end-to-end")
	}
	srv := redistest.New(t)
	dir := t.TempDir()
	cfg, once, _ := writeConfig(t, dir, srv.Addr())
	var reps []*proc
	for i := range 3 {
		p := &proc{name: fmt.Sprintf("run-%d", i), args: []string{"run", "--config", cfg, "--id", fmt.Sprintf("r%d", i), "--log-format", "json"}}
		p.start(t, dir)
		reps = append(reps, p)
	}
	logOnFailure(t, dir, reps)
	windowStart := awaitStarted(t, dir, reps)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		time.Sleep(time.Duration(2000+rng.IntN(1500)) * time.Millisecond) // real time: a replica process runs for its share of ticks between kills
		p := reps[rng.IntN(len(reps))]
		p.signal(syscall.SIGKILL)
		p.wait(t, 5*time.Second)
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond) // real time: a killed process stays down a while; its 5s tick leases run on the masters' clocks
		p.start(t, dir)
	}
	windowEnd := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	rdb := srv.TestClient(t)
	// a tick is skipped behind the run of an earlier tick: one on a replica
	// killed under it (its lease lasts its ttl), or one slow to end; a run
	// that started but was killed before the command wrote its first line
	// ran as far as baton is concerned: its history says started
	skipped := func() map[int64]string {
		out := behindAnotherRun(t, rdb, "e2e")
		recs, err := history.Read(context.Background(), rdb, "e2e", "every-second", 0)
		if err != nil {
			t.Logf("reading the history: %v", err)
		}
		for _, r := range recs {
			if !r.Started.IsZero() {
				out[r.Tick.Unix()] = "started, by its history, and cut off by a kill"
			}
		}
		return out
	}
	// the window's last ticks start or are skipped (as above). A tick whose
	// worker was killed between taking its task and recording its start is
	// run again once asynq recovers the task (a dead worker's 30 s lease,
	// found by a scan once a minute, then the retry's backoff): such a tick
	// is awaited as long as that takes; any other open tick for a minute
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	taskState := func(tick time.Time) string {
		info, err := insp.GetTaskInfo("e2e:default", "every-second@"+tick.UTC().Format(time.RFC3339))
		if err != nil {
			return err.Error()
		}
		return info.State.String()
	}
	recovering := func(tick time.Time) bool {
		switch taskState(tick) {
		case "active", "retry", "pending", "scheduled":
			return true
		}
		return false
	}
	waitFrom := time.Now()
	for ; ; time.Sleep(time.Second) { // real time: the runs are other processes', due by Redis TIME; read once a second
		started, skips := startsOf(t, once), skipped()
		var open []time.Time
		for tick := windowStart; !tick.After(windowEnd); tick = tick.Add(time.Second) {
			if started[tick.Unix()] == nil && skips[tick.Unix()] == "" {
				open = append(open, tick)
			}
		}
		waited := time.Since(waitFrom)
		if len(open) == 0 || waited > killedTaskRecovery || waited > time.Minute && !slices.ContainsFunc(open, recovering) {
			break
		}
	}
	for _, p := range reps {
		p.awaitRunning(t, dir) // as above
	}
	for _, p := range reps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range reps {
		p.wait(t, 15*time.Second)
	}

	per, skips := startsOf(t, once), skipped()
	for tick := windowStart; !tick.After(windowEnd); tick = tick.Add(time.Second) {
		s := per[tick.Unix()]
		switch {
		case s == nil && skips[tick.Unix()] != "":
			t.Logf("tick %v %s", tick.Format(time.RFC3339), skips[tick.Unix()])
		case s == nil || s.starts == 0:
			t.Errorf("tick %v never ran (its task: %s)", tick.Format(time.RFC3339), taskState(tick))
			logTick(t, dir, reps, "every-second", tick)
		case s.starts > 1 && s.starts-s.ends < s.starts-1:
			// every extra start must belong to a run cut off before its end
			t.Errorf("tick %v ran %d times with %d complete runs: a duplicate not explained by a kill", tick.Format(time.RFC3339), s.starts, s.ends)
		}
	}
}
