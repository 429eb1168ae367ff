package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/histcheck"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// Chaos settings, from the environment: BATON_CHAOS is how long faults run
// (a Go duration; default 15s, which CI runs; `make chaos` runs minutes),
// BATON_CHAOS_SEED the seed of the fault schedule (default: the clock,
// printed so a run can be replayed).
const (
	envChaos     = "BATON_CHAOS"
	envChaosSeed = "BATON_CHAOS_SEED"
)

// chaosConfig writes a job list whose jobs append "tick fence start|end
// unixnanos" lines to their own files, reached through addr; "chained"
// runs after "every-second" (chained.out in dir).
func chaosConfig(t *testing.T, dir, addr string) (cfg, every, forbid string) {
	every = filepath.Join(dir, "every.out")
	forbid = filepath.Join(dir, "forbid.out")
	chained := filepath.Join(dir, "chained.out")
	cfg = filepath.Join(dir, "chaos.yaml")
	line := func(out, what string) string {
		return fmt.Sprintf(`echo \"$BATON_TICK $BATON_FENCING_TOKEN %s $(date +%%s%%N)\" >> %s`, what, out)
	}
	y := fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
  restart_quarantine: 10s
namespace: chaos
history:
  runs: 5000
worker:
  concurrency: 20
  shutdown_grace: 5s
jobs:
  - name: every-second
    schedule: "@every 1s"
    starting_deadline: 30s
    catchup: all
    catchup_max: 100
    lock_ttl: 3s
    exec:
      command: ["sh", "-c", "%s; %s"]
  - name: slow-forbid
    schedule: "@every 1s"
    starting_deadline: 30s
    concurrency: forbid
    lock_ttl: 2s
    exec:
      command: ["sh", "-c", "trap '%s; exit 143' TERM; %s; sleep 1.5 & wait $!; %s"]
  - name: chained
    after: [every-second]
    starting_deadline: 2m
    concurrency: allow
    lock_ttl: 3s
    exec:
      command: ["sh", "-c", "%s; %s"]
`, addr, line(every, "start"), line(every, "end"), line(forbid, "stopped"), line(forbid, "start"), line(forbid, "end"),
		line(chained, "start"), line(chained, "end"))
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, every, forbid
}

// chaosSettle bounds the wait for the window's ticks to have their
// outcomes once faults stop: a tick dispatched as the last fault began may
// find its lock master restarted, and its task then waits out the restart
// quarantine (10 s) and baton's retries (retry_backoff 10 s, doubled at each
// of max_retry 3: 10 + 20 + 40 s), each picked up at asynq's next poll.
const chaosSettle = 2 * time.Minute

// tickOutcomes is what became of the ticks of a window of an every-second
// job.
type tickOutcomes struct {
	ran    []runLine        // the job's start lines
	notRun []jobs.RunRecord // not run, the history says why (the last word of each tick)
	open   []time.Time      // neither yet: dispatch or a retry may still come
}

// why counts the not-run ticks by the first words of their reasons.
func (o tickOutcomes) why() map[string]int {
	out := map[string]int{}
	for _, r := range o.notRun {
		k := string(r.Status)
		switch {
		case strings.Contains(r.Reason, "quarantine"):
			k += " (restart quarantine)"
		case strings.Contains(r.Reason, "vouch"):
			k += " (no master could vouch)"
		case strings.Contains(r.Reason, "execution lease"):
			k += " (execution lease)"
		}
		out[k]++
	}
	return out
}

// outcomes reads what became of each tick of [from, until] of the job
// "every-second" in namespace ns, whose runs write start lines to out: it
// ran, or the history records it not run with why (missed by the
// scheduler, skipped by the forbid policy, or failed before it started on
// every attempt: its task archived, which the queue tells), or it is still
// open.
func outcomes(t *testing.T, rdb *redis.Client, insp *asynq.Inspector, ns, out string, from, until time.Time) tickOutcomes {
	t.Helper()
	var o tickOutcomes
	ran := map[int64]bool{} // by tick, unix seconds
	for _, l := range readRunLines(t, out) {
		if l.what == "start" && !l.tick.Before(from) && !l.tick.After(until) {
			o.ran = append(o.ran, l)
			ran[l.tick.Unix()] = true
		}
	}
	recs, err := history.Read(context.Background(), rdb, ns, "every-second", 5000)
	if err != nil {
		t.Logf("reading the history: %v", err)
	}
	recorded := map[int64]jobs.RunRecord{} // by tick, unix seconds
	failed := map[int64]jobs.RunRecord{}
	for _, r := range recs { // newest first
		if r.Tick.Before(from) || r.Tick.After(until) || !r.Started.IsZero() {
			continue
		}
		switch r.Status {
		case jobs.StatusMissed, jobs.StatusSkipped: // the job is neither paused nor replace
			// not run: a tick the masters could not vouch for, one left
			// out by catch-up, or one that came while the job's run went
			// on (forbid)
			if _, ok := recorded[r.Tick.Unix()]; !ok {
				recorded[r.Tick.Unix()] = r
			}
		case jobs.StatusFailed: // an attempt that could not start (no execution lease)
			if _, ok := failed[r.Tick.Unix()]; !ok {
				failed[r.Tick.Unix()] = r
			}
		}
	}
	for tick := from; !tick.After(until); tick = tick.Add(time.Second) {
		if ran[tick.Unix()] {
			continue
		}
		if r, ok := recorded[tick.Unix()]; ok {
			o.notRun = append(o.notRun, r)
			continue
		}
		if r, ok := failed[tick.Unix()]; ok {
			// final only once the task is archived: every attempt failed
			info, err := insp.GetTaskInfo(ns+":default", "every-second@"+tick.UTC().Format(time.RFC3339))
			if err == nil && info.State == asynq.TaskStateArchived {
				r.Reason = "every attempt failed before it started, the last: " + r.Reason
				o.notRun = append(o.notRun, r)
				continue
			}
		}
		o.open = append(o.open, tick)
	}
	return o
}

// awaitOutcomes waits, at most bound, until every tick of [from, until] has
// its outcome (see outcomes), and returns how many are still open. Ticks run
// in real time, in other processes: their outcomes are read once a second.
func awaitOutcomes(t *testing.T, rdb *redis.Client, insp *asynq.Inspector, ns, out string, from, until time.Time, bound time.Duration) int {
	t.Helper()
	for end := time.Now().Add(bound); ; time.Sleep(time.Second) { // real time: ticks run in other processes, due by Redis TIME; their outcomes are read once a second
		open := len(outcomes(t, rdb, insp, ns, out, from, until).open)
		if open == 0 || time.Now().After(end) {
			return open
		}
	}
}

// runLine is one line a chaos job wrote.
type runLine struct {
	tick  time.Time
	fence int64
	what  string
	at    time.Time
}

// readRunLinesIfAny is readRunLines of a file a job may not have written
// yet.
func readRunLinesIfAny(t *testing.T, path string) []runLine {
	t.Helper()
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil
	}
	return readRunLines(t, path)
}

func readRunLines(t *testing.T, path string) []runLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []runLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue // cut by a kill
		}
		tick, err1 := time.Parse(time.RFC3339, fs[0])
		fence, err2 := strconv.ParseInt(fs[1], 10, 64)
		ns, err3 := strconv.ParseInt(fs[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, runLine{tick, fence, fs[2], time.Unix(0, ns)})
	}
	return out
}

// TestChaos runs three schedulers and two workers as processes against one
// Redis (queue and lock master, with appendfsync always) reached through a
// fault proxy, and injects random faults for BATON_CHAOS: schedulers
// SIGKILLed and restarted, schedulers frozen (SIGSTOP) past their leases
// and resumed, latency and cuts on every process's path to Redis, and Redis
// itself killed and restarted from its append-only file. Workers are not
// killed (a killed worker's run is run again: asynq executes at least once).
// The history checker then judges every tick of the window (ran exactly
// once, or recorded in the job's history as not run, with why), the
// forbid job's runs (never overlapping) and the chain's (each run of
// "chained" after its tick's run of "every-second" succeeded, once); a
// summary is printed.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	d := 15 * time.Second
	if v := os.Getenv(envChaos); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 3m", envChaos, v)
		}
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envChaosSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", envChaosSeed, v)
		}
	}
	fmt.Printf("chaos: seed %d, faults for %v (replay: %s=%d %s=%v make chaos)\n", seed, d, envChaosSeed, seed, envChaos, d)
	rng := rand.New(rand.NewPCG(seed, 13))

	srv := redistest.New(t, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	px := redistest.NewTestProxy(t, srv.Addr())
	dir := t.TempDir()
	cfg, every, forbid := chaosConfig(t, dir, px.Addr())
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
	t.Cleanup(func() {
		for _, p := range append(scheds, workers...) {
			p.signal(syscall.SIGCONT)
		}
		if t.Failed() {
			for _, p := range append(scheds, workers...) {
				b, _ := os.ReadFile(filepath.Join(dir, p.name+".log"))
				lines := strings.Split(strings.TrimSpace(string(b)), "\n")
				t.Logf("%s, last lines:\n%s", p.name, strings.Join(lines[max(0, len(lines)-8):], "\n"))
			}
		}
	})
	from := awaitStarted(t, dir, append(scheds, workers...))
	faults := map[string]int{}
	sleep := func(lo, hi int) { time.Sleep(time.Duration(lo+rng.IntN(hi-lo)) * time.Millisecond) } // real time: the faults last as long as the processes and masters' clocks say (SIGSTOP past 5s tick leases at times)
	for end := time.Now().Add(d); time.Now().Before(end); {
		sleep(1000, 3000)
		switch k := rng.IntN(5); k {
		case 0:
			p := scheds[rng.IntN(len(scheds))]
			p.signal(syscall.SIGKILL)
			p.wait(t, 5*time.Second)
			sleep(200, 1000)
			p.start(t, dir)
			faults["scheduler killed"]++
		case 1:
			p := scheds[rng.IntN(len(scheds))]
			p.signal(syscall.SIGSTOP)
			sleep(500, 7000) // past its tick leases (5s) at times
			p.signal(syscall.SIGCONT)
			faults["scheduler frozen"]++
		case 2:
			if err := px.AddLatency(time.Duration(50+rng.IntN(250))*time.Millisecond, rng.IntN(2) == 0); err != nil {
				t.Fatal(err)
			}
			sleep(1000, 2000)
			if err := px.Restore(); err != nil {
				t.Fatal(err)
			}
			faults["latency"]++
		case 3:
			if err := px.Cut(); err != nil {
				t.Fatal(err)
			}
			sleep(300, 1500)
			if err := px.Restore(); err != nil {
				t.Fatal(err)
			}
			faults["cut"]++
		case 4:
			if err := srv.RestartFromSnapshot(); err != nil { // kill -9, reload the append-only file
				t.Fatal(err)
			}
			faults["redis restarted"]++
		}
	}
	until := time.Now().Add(-2 * time.Second).Truncate(time.Second)
	// the window's late ticks (held back by a restarted master's
	// quarantine, or retried after it) are awaited until each has its
	// outcome, within the longest that baton's delays add up to
	rdb := srv.TestClient(t)
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	open := awaitOutcomes(t, rdb, insp, "chaos", every, from, until, chaosSettle)
	for _, p := range append(scheds, workers...) {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range append(scheds, workers...) {
		p.wait(t, 20*time.Second)
	}

	h := histcheck.New()
	for tick := from; !tick.After(until); tick = tick.Add(time.Second) {
		h.Ticked(histcheck.Tick{Job: "every-second", Tick: tick, Event: "expected"})
	}
	o := outcomes(t, rdb, insp, "chaos", every, from, until)
	// what the cluster recorded as not run, with its reason
	for _, r := range o.notRun {
		h.Ticked(histcheck.Tick{Job: "every-second", Tick: r.Tick, Event: "missed", Replica: r.Dispatcher, Reason: string(r.Status) + ": " + r.Reason})
	}
	var gap time.Duration
	for _, l := range o.ran {
		h.Ticked(histcheck.Tick{Job: "every-second", Tick: l.tick, Event: "dispatched", Replica: fmt.Sprintf("fence %d", l.fence)})
		gap = max(gap, l.at.Sub(l.tick))
	}
	runs := map[string]*histcheck.Run{}
	for _, l := range readRunLines(t, forbid) {
		id := fmt.Sprintf("%s/%d", l.tick.Format(time.RFC3339), l.fence)
		r := runs[id]
		if r == nil {
			r = &histcheck.Run{Job: "slow-forbid", Tick: l.tick, Worker: fmt.Sprintf("fence %d", l.fence), Exclusive: true}
			runs[id] = r
		}
		if l.what == "start" {
			r.Start = l.at
		} else {
			r.End = l.at // "end", or "stopped" by SIGTERM (its lease lost, or shutdown)
			r.Stopped = l.what == "stopped"
		}
	}
	for _, r := range runs {
		if !r.Start.IsZero() {
			h.Ran(*r) // without an end: cut off, and still excluding others
		}
	}
	// the chain: each run of chained started after a run of its tick of
	// every-second ended (its end line: the command's last, so a success)
	chainRuns := 0
	for _, job := range []struct{ name, out string }{{"every-second", every}, {"chained", filepath.Join(dir, "chained.out")}} {
		byRun := map[string]*histcheck.Run{}
		var order []string
		for _, l := range readRunLinesIfAny(t, job.out) {
			id := fmt.Sprintf("%s/%d", l.tick.Format(time.RFC3339), l.fence)
			r := byRun[id]
			if r == nil {
				r = &histcheck.Run{Job: job.name, Tick: l.tick, Worker: fmt.Sprintf("fence %d", l.fence)}
				if job.name == "chained" {
					r.After = []string{"every-second"}
				}
				byRun[id] = r
				order = append(order, id)
			}
			if l.what == "start" {
				r.Start = l.at
			} else {
				r.End, r.Succeeded = l.at, true
			}
		}
		for _, id := range order {
			if r := byRun[id]; !r.Start.IsZero() {
				h.Ran(*r)
				if job.name == "chained" {
					chainRuns++
				}
			}
		}
	}
	lost := 0
	for _, p := range append(scheds, workers...) {
		b, _ := os.ReadFile(filepath.Join(dir, p.name+".log"))
		lost += strings.Count(string(b), "lease lost") + strings.Count(string(b), "locking: lost")
	}
	c := h.Counts()
	verdict := "no violation"
	err := h.Check()
	if err != nil {
		verdict = err.Error()
	}
	fmt.Printf("chaos: seed %d, %v of faults %v\n", seed, d, faults)
	fmt.Printf("chaos: ticks expected %d, ran %d, duplicated %d, missed %d (recorded) + %d (lost); forbid runs %d; leases lost %d; longest tick-to-start gap %v\n",
		c.Expected, c.Dispatched, c.Duplicated, c.Missed, c.Lost, c.Runs, lost, gap.Round(time.Millisecond))
	fmt.Printf("chaos: not run, by reason: %v; still open when the processes stopped: %d; chained runs %d\n", o.why(), open, chainRuns)
	fmt.Printf("chaos: checker: %s\n", verdict)
	if err != nil {
		// what the processes logged about the tick in question
		if m := regexp.MustCompile(`@(\S+Z)`).FindStringSubmatch(err.Error()); m != nil {
			for _, p := range append(scheds, workers...) {
				b, _ := os.ReadFile(filepath.Join(dir, p.name+".log"))
				for l := range strings.Lines(string(b)) {
					if strings.Contains(l, m[1]) || strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"warn"`) {
						t.Logf("%s: %s", p.name, strings.TrimSpace(l))
					}
				}
			}
		}
		t.Fatal(err)
	}
}
