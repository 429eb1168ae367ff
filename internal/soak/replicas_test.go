package soak

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/batonbin"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/scheduler"
)

// soakPlan is what TestSoakReplicas does over its load time: the figures
// of `make soak` (30 minutes) and, below ten minutes, a smaller load of the
// same shape whose memory is reported, not judged.
type soakPlan struct {
	load      time.Duration // how long the load runs
	jobs      int           // job-list jobs
	every     []int         // their periods, seconds, a share of the jobs each (listEvery for make soak)
	schedules int           // runtime schedules put at the start
	ticking   int           // one runtime schedule in this many ticks in the run, once a period
	period    time.Duration
	deadline  time.Duration // starting_deadline of every job
	backlog   time.Duration // a tick's outcome is read this long after its deadline
	churn     time.Duration // one put, replace or delete of a runtime schedule each
	sample    time.Duration // memory read this often
	window    time.Duration // the medians compared are of this long before minute 10 and 30
	step      time.Duration // the ledger is read a step of ticks at a time
	restarts  []time.Duration
	master    time.Duration // the lock master's restart
	judge     bool          // growth above maxGrowth fails the test
}

// listEvery are the job list's periods, a quarter of the jobs each: 21
// ticks a second for 500 jobs, and the runtime schedules' 7 beside them.
// On two cores shared with other test suites (load average 60) the three
// replicas ran 38 to 44 tasks a second: at 2 to 15 seconds (54 to 143 a
// second) the queue's backlog grew all along, a load never steady.
var listEvery = []int{15, 20, 30, 60}

// maxGrowth is the most a replica's RSS, goroutines or live heap, or a
// Redis's used_memory, may grow from minute 10 to minute 30, in percent.
const maxGrowth = 5.0

func planFor(d time.Duration) soakPlan {
	// the short load's periods are shorter than its load, so every window
	// of it has job-list ticks due (at 15 s to 60 s, one of 10 s may have
	// none)
	p := soakPlan{load: d, jobs: 50, every: []int{2, 3, 5, 7}, schedules: 200, ticking: 1, period: 10 * time.Second, deadline: 8 * time.Second,
		backlog: 5 * time.Second, churn: 100 * time.Millisecond, sample: time.Second, step: 5 * time.Second}
	if d >= 10*time.Minute {
		p = soakPlan{load: d, jobs: 500, every: listEvery, schedules: 10000, ticking: 5, period: 5 * time.Minute, deadline: time.Minute,
			backlog: time.Minute, churn: 200 * time.Millisecond, sample: 30 * time.Second, step: time.Minute, judge: true}
	}
	p.window = max(d/10, 3*p.sample)
	for k := 1; k <= 5; k++ {
		p.restarts = append(p.restarts, d*time.Duration(k)/6)
	}
	p.master = d * 7 / 12
	return p
}

// TestSoakReplicas runs baton as it is deployed, for BATON_SOAK (default
// 10s, which the suite runs on a smaller load; `make soak` 30m): three
// `baton run` processes against a queue Redis and three lock masters apart
// (a Redlock quorum), each its own redis-server on loopback. The job list
// has 500 jobs running `true` every 15 to 60 seconds. 10,000 runtime
// schedules, http requests to the test's own server, are put at the start
// (one in five every 5 minutes, spread over them; the others daily at an
// hour the run does not reach, as most per-customer schedules: held and
// followed by every replica, not due), and five a second are put, replaced or
// deleted all along. The third replica is stopped (SIGTERM) and started
// again every sixth of the run (minutes 5, 10, ... 25), and one lock master
// is killed and started empty at minute 17.5 (it waits out its restart
// quarantine while the other two decide).
//
// Every 30 s it reads each replica's RSS (/proc/PID/status), goroutines and
// live heap (its /metrics: go_goroutines, go_gc_heap_live_bytes), each
// Redis's used_memory and the queue's backlog; RSS and the live heap right
// after the replica collected its garbage and returned its free pages
// (profile_test.go). What it compares is the median of the samples of the
// three minutes before minute 10 with that of the three minutes before
// minute 30: a median, so that one sample taken amid a burst of ticks
// decides nothing; for goroutines and RSS at rest, the least (the process
// at rest, without the runs in flight of the moment). The first two
// replicas run throughout and are compared process to process. The third
// is a new process at each end, in both windows 2 to 5 minutes old
// (started at minutes 5 and 25): the same age, which is what makes a
// fresh process comparable at all, since a young process has not settled
// its heap and RSS after reading the 10,000 schedules. The restarted
// master is compared across its restart: empty at minute 17.5, it holds at
// minute 30 what the steady load put there since. Growth beyond 5 % fails,
// at ten minutes of load or more (a shorter run reports its figures; its
// windows are seconds).
//
// Every tick due in the run is accounted for: the ledger
// (Cluster.TicksAll) is read a minute of ticks at a time, once those ticks
// are a minute past their starting deadline, and each must have run (ok, or failed
// with why) or be recorded not run with why (skipped, missed, paused, ...);
// none may be due, dispatched, running or unknown then, and none may have
// run twice (the history's run ids of a tick). A runtime schedule's ticks
// are those of each schedule not put, replaced or deleted since 3 s
// before the window: the test's server saw each one once, and for one it
// did not see, that schedule's ledger says why.
func TestSoakReplicas(t *testing.T) {
	d := 10 * time.Second
	if v := os.Getenv(envSoak); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration", envSoak, v)
		}
	}
	p := planFor(d)
	dir := t.TempDir()
	bin, err := batonbin.Build(dir, profileTag)
	if err != nil {
		t.Fatal(err)
	}
	// streams trim in whole nodes: at Redis's default of 100 entries a node,
	// the history streams of the jobs of one period, started together,
	// would swing together by megabytes; nodes of 10 keep the queue's
	// memory a level one can compare
	queue := redistest.New(t, redistest.WithArgs("--stream-node-max-entries", "10"))
	masters := redistest.NewN(t, 3)
	hits := newHitLog()
	hook := httptest.NewServer(hits)
	defer hook.Close()

	cfgPath := filepath.Join(dir, "baton.yaml")
	if err := os.WriteFile(cfgPath, soakConfig(p, queue.Addr(), masters, hook.URL+"/"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "init", "--config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("baton init: %v\n%s", err, out)
	}
	cfg, err := config.LoadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	// the history of 500 jobs is read in one pipeline: seconds on a busy host
	qc := queue.TestClient(t, func(o *redis.Options) { o.ReadTimeout, o.WriteTimeout = 30*time.Second, 30*time.Second })

	var reps []*replica
	for i := range 3 {
		r := &replica{name: fmt.Sprintf("r%d", i), bin: bin, dir: dir, cfg: cfgPath, addr: redistest.FreeAddr(t), prof: redistest.FreeAddr(t)}
		r.start(t)
		reps = append(reps, r)
	}
	t.Cleanup(func() {
		for _, r := range reps {
			r.stop(t)
		}
		if t.Failed() {
			for _, r := range reps {
				t.Logf("%s, last lines:\n%s", r.name, r.tail(12))
			}
		}
	})
	for _, r := range reps {
		r.awaitStarted(t)
	}
	t0 := time.Now()
	t.Logf("soak: %v of load from %s UTC: %d job-list jobs, %d runtime schedules, 3 replicas, 3 lock masters", d, t0.UTC().Format(time.DateTime), p.jobs, p.schedules)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	book := newScheduleBook(p, hook.URL+"/")
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := book.putAll(ctx, cluster); err != nil && ctx.Err() == nil {
			t.Errorf("putting the runtime schedules: %v", err)
			return
		}
		t.Logf("soak: %d runtime schedules put in %v", p.schedules, time.Since(t0).Round(time.Second))
		book.churnUntil(ctx, cluster, t0.Add(p.load))
	})
	defer wg.Wait()

	acct := &ledgerCheck{cluster: cluster, queue: qc, ns: cfg.Namespace, hits: hits, book: book}
	for _, j := range cfg.Jobs {
		acct.names = append(acct.names, j.Name)
	}
	// accounting starts at the first step boundary after the replicas
	// started; a tick's outcome is final past its starting deadline
	next := t0.Truncate(p.step).Add(p.step)
	lag := p.deadline + p.backlog
	var samples []memSample
	wg.Go(func() { samples = sampleUntil(ctx, t, p, t0, reps, queue, masters) })
	restarts, masterDone := slices.Clone(p.restarts), false
	servers := append([]*redistest.Server{queue}, masters...)
	serverNames := []string{"queue Redis", "lock master 0", "lock master 1", "lock master 2"}
	var keysAt10, keysAtEnd []map[string]int
	var memAt10, memAtEnd []map[string]int64 // MEMORY STATS
	heaps := newHeapProfiles(dir, reps[:2])  // r0 and r1 run throughout
	for now := time.Now(); now.Before(t0.Add(p.load)); now = time.Now() {
		switch {
		case keysAt10 == nil && !now.Before(t0.Add(p.load/3)):
			for _, srv := range servers {
				keysAt10 = append(keysAt10, keyCounts(srv))
				memAt10 = append(memAt10, memoryStats(srv))
			}
			heaps.take(t, "start")
		case !masterDone && !now.Before(t0.Add(p.master)):
			masterDone = true
			if err := masters[1].Restart(); err != nil {
				t.Fatalf("restarting lock master 1: %v", err)
			}
			t.Logf("soak: %v: lock master 1 restarted empty", now.Sub(t0).Round(time.Second))
		case len(restarts) > 0 && !now.Before(t0.Add(restarts[0])):
			restarts = restarts[1:]
			r := reps[2]
			r.stop(t)
			r.start(t)
			r.awaitStarted(t)
			t.Logf("soak: %v: %s restarted", now.Sub(t0).Round(time.Second), r.name)
		case !now.Before(next.Add(p.step + lag)):
			acct.window(t, ctx, next, next.Add(p.step-time.Millisecond))
			t.Logf("soak: %v: ticks of %s UTC accounted in %v (%d not accounted for so far, %d lookups); %d tasks pending",
				now.Sub(t0).Round(time.Second), next.UTC().Format(time.TimeOnly), time.Since(now).Round(time.Millisecond), acct.badCount, acct.lookups, pendingTasks(queue))
			next = next.Add(p.step)
		default:
			time.Sleep(100 * time.Millisecond) // real time: the load is other processes'
		}
	}
	heaps.take(t, "end")
	for _, srv := range servers {
		memAtEnd = append(memAtEnd, memoryStats(srv))
	}
	cancel() // the churn and the samples stop; the replicas run on until the last ticks are final
	wg.Wait()
	for _, srv := range servers {
		keysAtEnd = append(keysAtEnd, keyCounts(srv))
	}
	end := t0.Add(p.load)
	for ; next.Before(end); next = next.Add(p.step) {
		wait := time.Until(next.Add(p.step + lag))
		time.Sleep(max(wait, 0)) // real time: the ticks' starting deadline runs on the masters' clocks
		acct.window(t, context.Background(), next, next.Add(p.step-time.Millisecond))
	}
	// the first replica, which ran throughout, is asked for its
	// goroutines (SIGQUIT: the Go runtime writes every goroutine's stack to
	// its log and exits): what waits where, and how long, tells a leak
	dump := reps[0].dumpGoroutines(t)
	for _, r := range reps[1:] {
		r.stop(t)
		if code := r.exitCode(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM", r.name, code)
		}
	}

	fmt.Print(acct.report())
	fmt.Print(growthReport(t, p, samples))
	fmt.Print(goroutineReport(reps[0].name, dump))
	if keysAt10 != nil {
		fmt.Print(keyGrowthReport(serverNames, keysAt10, keysAtEnd))
		fmt.Print(memoryStatsReport(serverNames, memAt10, memAtEnd))
	}
	fmt.Print(heaps.report(t, bin))
	acct.verdict(t)
}

// soakConfig is the job list: p.jobs exec jobs running `true` every 15 to
// 60 seconds, and runtime schedules allowed to call prefix. A run's
// timeout (10s) and retries (1) bound how long its task, and so its
// tick's ledger record, lives (about 5 minutes; with no timeout, a day).
// The history is
// bounded so that Redis reaches its steady state before minute 10: a job's
// by age (5m, beyond the ledger's reads: with the default 100 runs a
// 60-second job's stream would fill for 100 minutes); a runtime schedule
// keeps none (the test's server sees its runs, its ledger reads its tick
// records). Each replica runs 100 tasks at once: on a busy host a run
// waits on its round trips more than on the CPU.
func soakConfig(p soakPlan, queue string, masters []*redistest.Server, prefix string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "redis: {url: \"redis://%s/0\"}\nlocking:\n  masters:\n", queue)
	for _, m := range masters {
		fmt.Fprintf(&b, "    - redis://%s/0\n", m.Addr())
	}
	fmt.Fprintf(&b, `namespace: soak
history: {max_age: 5m}
schedules: {http_prefixes: [%q], history: 0}
worker: {concurrency: 100, shutdown_grace: 5s}
jobs:
`, prefix)
	for i := range p.jobs {
		fmt.Fprintf(&b, "  - {name: list-%03d, schedule: \"@every %ds\", starting_deadline: %s, timeout: 10s, max_retry: 1, exec: {command: [\"true\"]}}\n",
			i, p.every[i%len(p.every)], p.deadline)
	}
	return []byte(b.String())
}

// replica is one `baton run` process, started again after each stop.
type replica struct {
	name, bin, dir, cfg, addr string
	prof                      string // its profiles' address (profile_test.go)
	log                       *os.File
	starts                    int // "replica started" lines before the last start

	mu   sync.Mutex // the process of the last start, read by the sampler too
	cmd  *exec.Cmd
	done chan struct{}
}

func (r *replica) logPath() string { return filepath.Join(r.dir, r.name+".log") }

func (r *replica) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(r.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(r.logPath())
	r.starts = strings.Count(string(b), `"message":"replica started"`)
	r.log = f
	cmd := exec.Command(r.bin, "run", "--config", r.cfg, "--id", r.name, "--log-format", "json", "--http", r.addr)
	cmd.Env = append(os.Environ(), "BATON_PROFILE_ADDR="+r.prof)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = redistest.ChildProcAttr() // gone with the test binary
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.mu.Unlock()
}

func (r *replica) awaitStarted(t *testing.T) {
	t.Helper()
	poll.Require(t, time.Minute, r.name+" to start", func() bool {
		b, _ := os.ReadFile(r.logPath())
		return strings.Count(string(b), `"message":"replica started"`) > r.starts
	})
}

// pid is the process of the last start, 0 once it has exited.
func (r *replica) pid() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		return 0
	}
	select {
	case <-r.done:
		return 0
	default:
		return r.cmd.Process.Pid
	}
}

// exitCode is how the process of the last start exited (-1: it runs).
func (r *replica) exitCode() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.ProcessState == nil {
		return -1
	}
	return r.cmd.ProcessState.ExitCode()
}

// stop stops the process with SIGTERM and waits for it, at most 30 s
// (then SIGKILL); a stopped replica is left alone.
func (r *replica) stop(t *testing.T) {
	if r.pid() == 0 {
		return
	}
	r.signalAndWait(t, syscall.SIGTERM, "stop")
}

// signalAndWait sends sig to the process and waits for it to exit, at
// most 30 s (then SIGKILL: it did not do what, said), and closes its log.
func (r *replica) signalAndWait(t *testing.T, sig syscall.Signal, what string) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not %s within 30s of %v; killing it", r.name, what, sig)
		_ = cmd.Process.Kill()
		<-done
	}
	r.log.Close()
}

func (r *replica) tail(n int) string {
	b, _ := os.ReadFile(r.logPath())
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// memSample is one reading of every replica and Redis.
type memSample struct {
	at    time.Duration // since the load began
	reps  []procMem     // by replica; zero where it was not running
	redis []int64       // used_memory: the queue Redis, then each master
	conns []int64       // connected_clients, as redis
	// tasks waiting in the queue: a backlog that grows is a load the
	// host does not keep up with, not a steady one
	pending int64
}

type procMem struct {
	pid int
	rss int64 // bytes
	// RSS right after the process collected its garbage and returned its
	// free pages to the OS (profile_test.go): what it holds, not the
	// garbage of the moment since its last GC
	rssRest int64
	// rssRest's parts: what the process wrote (anonymous), and pages of
	// mapped files (its binary's code and data, first touched as code
	// runs for the first time: clean, shared, reclaimable)
	anonRest, fileRest int64
	goroutines         int64
	heapLive           int64 // go_gc_heap_live_bytes
	heapAlloc          int64 // go_memstats_heap_alloc_bytes
	// the heap's memory the runtime holds from the OS (heap sys less what
	// it released), and the goroutines' stacks: most of RSS
	heapHeld, heapReleased, stacks int64
	// the runtime's own memory beside the heap and stacks: span and
	// cache structures, the collector's metadata, the profiler's buckets
	// and the rest (go_memstats_{mspan,mcache}_inuse_bytes,
	// gc_sys_bytes, buck_hash_sys_bytes, other_sys_bytes)
	runtimeMeta int64
}

// sampleUntil reads every replica and Redis each p.sample from t0 until
// the load ends (or ctx does), the replicas side by side: a replica's
// /metrics (500 jobs' series) takes seconds on a busy host.
func sampleUntil(ctx context.Context, t *testing.T, p soakPlan, t0 time.Time, reps []*replica, queue *redistest.Server, masters []*redistest.Server) []memSample {
	var out []memSample
	tick := time.NewTicker(p.sample)
	defer tick.Stop()
	for at := time.Now(); at.Before(t0.Add(p.load)); at = time.Now() {
		s := memSample{at: at.Sub(t0), reps: make([]procMem, len(reps))}
		var wg sync.WaitGroup
		for i, r := range reps {
			wg.Go(func() {
				if pid := r.pid(); pid != 0 {
					s.reps[i] = readProc(pid, r.addr, r.prof)
				}
			})
		}
		for _, srv := range append([]*redistest.Server{queue}, masters...) {
			used, conns := usedMemory(t, srv)
			s.redis, s.conns = append(s.redis, used), append(s.conns, conns)
		}
		s.pending = pendingTasks(queue)
		wg.Wait()
		out = append(out, s)
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
	return out
}

// readProc reads a replica's RSS from /proc and its Go figures from its
// /metrics; what it cannot read stays 0 (and is left out of the medians).
func readProc(pid int, addr, prof string) procMem {
	m := procMem{pid: pid, rss: vmRSS(pid)}
	if freeOSMemory(prof) {
		st := procStatus(pid)
		m.rssRest, m.anonRest, m.fileRest = st["VmRSS:"], st["RssAnon:"], st["RssFile:"]
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return m
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			m.goroutines = int64(f)
		case "go_gc_heap_live_bytes":
			m.heapLive = int64(f)
		case "go_memstats_heap_alloc_bytes":
			m.heapAlloc = int64(f)
		case "go_memstats_heap_sys_bytes":
			m.heapHeld += int64(f)
		case "go_memstats_heap_released_bytes":
			m.heapReleased = int64(f)
		case "go_memstats_stack_inuse_bytes":
			m.stacks = int64(f)
		case "go_memstats_mspan_inuse_bytes", "go_memstats_mcache_inuse_bytes", "go_memstats_gc_sys_bytes",
			"go_memstats_buck_hash_sys_bytes", "go_memstats_other_sys_bytes":
			m.runtimeMeta += int64(f)
		}
	}
	m.heapHeld -= m.heapReleased
	return m
}

func usedMemory(t *testing.T, srv *redistest.Server) (used, clients int64) {
	c := srv.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "memory", "clients").Result()
	if err != nil {
		return 0, 0 // a master restarting
	}
	for l := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "used_memory":
			used = n
		case "connected_clients":
			clients = n
		}
	}
	return used, clients
}

// pendingTasks is the length of the queue's pending list (asynq's
// default queue of namespace soak).
func pendingTasks(srv *redistest.Server) int64 {
	c := srv.Client()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, _ := c.LLen(ctx, "asynq:{soak:default}:pending").Result()
	return n
}

// growth is one figure's medians (or fewest) at both ends and how it grew.
type growth struct {
	what       string
	start, end float64
	pct        float64
	a, b       []float64 // the samples of each window
}

// median is the median of the non-zero values of vs (0 for none).
func median(vs []float64) float64 {
	vs = slices.DeleteFunc(slices.Clone(vs), func(v float64) bool { return v == 0 })
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	if n := len(vs); n%2 == 0 {
		return (vs[n/2-1] + vs[n/2]) / 2
	}
	return vs[len(vs)/2]
}

// fewest is the smallest of vs that is read (above 0), 0 when none is.
func fewest(vs []float64) float64 {
	out := 0.0
	for _, v := range vs {
		if v > 0 && (out == 0 || v < out) {
			out = v
		}
	}
	return out
}

// growths compares every figure's median over the window before a third
// of the load (minute 10) with that over the window before its end
// (minute 30).
func growths(p soakPlan, samples []memSample) []growth {
	in := func(s memSample, end time.Duration) bool { return s.at >= end-p.window && s.at < end }
	of := func(what string, f func(memSample) float64, by func([]float64) float64) growth {
		var a, b []float64
		for _, s := range samples {
			switch {
			case in(s, p.load/3):
				a = append(a, f(s))
			case in(s, p.load):
				b = append(b, f(s))
			}
		}
		g := growth{what: what, start: by(a), end: by(b), a: a, b: b}
		if g.start > 0 {
			g.pct = (g.end - g.start) / g.start * 100
		}
		return g
	}
	figure := func(what string, f func(memSample) float64) growth { return of(what, f, median) }
	var out []growth
	for i := range 3 {
		rep := func(s memSample) procMem {
			if i < len(s.reps) {
				return s.reps[i]
			}
			return procMem{}
		}
		name := fmt.Sprintf("r%d", i)
		out = append(out,
			// judged: RSS at rest, the least of the window's samples (each
			// read right after a GC that returned the free pages): what
			// the process holds between bursts. The median also holds the
			// stacks and heap of the runs in flight at the moments sampled
			// (r0's stacks 2.7 -> 3.8 MiB at 52 goroutines at both ends);
			// a leak raises the least as well. Shown: the median, and the
			// samples.
			of(name+" RSS at rest MiB", func(s memSample) float64 { return float64(rep(s).rssRest) / (1 << 20) }, fewest),
			figure(name+" RSS at rest MiB, median", func(s memSample) float64 { return float64(rep(s).rssRest) / (1 << 20) }),
			figure(name+" RSS MiB", func(s memSample) float64 { return float64(rep(s).rss) / (1 << 20) }),
			figure(name+" goroutines, median", func(s memSample) float64 { return float64(rep(s).goroutines) }),
			figure(name+" live heap MiB", func(s memSample) float64 { return float64(rep(s).heapLive) / (1 << 20) }),
			figure(name+" heap alloc MiB", func(s memSample) float64 { return float64(rep(s).heapAlloc) / (1 << 20) }),
			// judged: the goroutines a process keeps at rest, the fewest of
			// the window's samples; the median follows the runs in flight
			// at the moments sampled (up to 100, some 6 goroutines each),
			// which moved it by 11 to 98 % between windows of runs whose
			// fewest did not move. A leak raises the fewest too.
			of(name+" goroutines at rest", func(s memSample) float64 { return float64(rep(s).goroutines) }, fewest),
			// shown: what its RSS is made of
			figure(name+" heap held MiB", func(s memSample) float64 { return float64(rep(s).heapHeld) / (1 << 20) }),
			figure(name+" stacks MiB", func(s memSample) float64 { return float64(rep(s).stacks) / (1 << 20) }),
			figure(name+" runtime metadata MiB", func(s memSample) float64 { return float64(rep(s).runtimeMeta) / (1 << 20) }),
			figure(name+" RSS at rest, anonymous MiB", func(s memSample) float64 { return float64(rep(s).anonRest) / (1 << 20) }),
			figure(name+" RSS at rest, files MiB", func(s memSample) float64 { return float64(rep(s).fileRest) / (1 << 20) }),
		)
	}
	out = append(out, figure("queue backlog (pending tasks)", func(s memSample) float64 { return float64(s.pending) + 0.5 }))
	for i, name := range []string{"queue Redis", "lock master 0", "lock master 1 (restarted)", "lock master 2"} {
		out = append(out, figure(name+" used_memory MiB", func(s memSample) float64 {
			if i < len(s.redis) {
				return float64(s.redis[i]) / (1 << 20)
			}
			return 0
		}), figure(name+" connections", func(s memSample) float64 {
			if i < len(s.conns) {
				return float64(s.conns[i])
			}
			return 0
		}))
	}

	return out
}

// growthReport prints the comparison, and fails the test on growth above
// maxGrowth when the plan judges it. heap alloc (live and garbage) is
// printed for the operator's dashboards; the live heap is what is judged.
// So for RSS: a Go process's RSS at a random moment is its live heap plus
// the garbage made since its last GC (up to as much again, GOGC=100) plus
// the free pages the runtime has not yet returned, which it returns at its
// own pace; what is judged is RSS at rest, read right after the process
// collected and returned them, and RSS as read is shown beside it.
// The backlog (printed half a task up, so that an empty queue shows) tells
// a load the host kept up with.
func growthReport(t *testing.T, p soakPlan, samples []memSample) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "soak: medians of %d samples (every %v) over the %v before %v and before %v:\n", len(samples), p.sample, p.window, p.load/3, p.load)
	for _, g := range growths(p, samples) {
		fmt.Fprintf(&b, "soak:   %-36s %10.1f -> %10.1f  %+6.1f %%\n", g.what, g.start, g.end, g.pct)
		if strings.HasSuffix(g.what, "RSS at rest MiB") || strings.HasSuffix(g.what, "used_memory MiB") {
			fmt.Fprintf(&b, "soak:     samples %.1f | %.1f\n", g.a, g.b)
		}
		judged := !strings.Contains(g.what, "heap alloc") && !strings.Contains(g.what, "backlog") &&
			!strings.Contains(g.what, "median") && !strings.Contains(g.what, "held") && !strings.Contains(g.what, "stacks") && !strings.Contains(g.what, "metadata") && !strings.HasSuffix(g.what, " connections") &&
			!strings.HasSuffix(g.what, " RSS MiB") && !strings.Contains(g.what, "RSS at rest, ") // its parts: shown
		switch {
		case !p.judge || !judged:
		case g.start == 0 || g.end == 0:
			t.Errorf("%s: no samples at one end (%v, %v)", g.what, g.start, g.end)
		case g.pct > maxGrowth:
			t.Errorf("%s grew %.1f %% from %v to %v (%.1f -> %.1f): more than %.0f %%", g.what, g.pct, p.load/3, p.load, g.start, g.end, maxGrowth)
		}
	}
	return b.String()
}

// hitLog is the server the runtime schedules call: it counts each
// (schedule, tick)'s runs by run id.
type hitLog struct {
	mu   sync.Mutex
	runs map[hitKey][]string
}

type hitKey struct {
	job  string
	tick int64 // unix seconds
}

func newHitLog() *hitLog { return &hitLog{runs: map[hitKey][]string{}} }

func (h *hitLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tick, err := time.Parse(time.RFC3339, r.Header.Get("X-Baton-Tick"))
	if err == nil {
		k := hitKey{r.Header.Get("X-Baton-Job"), tick.Unix()}
		h.mu.Lock()
		if id := r.Header.Get("X-Baton-Run-Id"); !slices.Contains(h.runs[k], id) {
			h.runs[k] = append(h.runs[k], id)
		}
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// take returns the run ids of job's tick and forgets them.
func (h *hitLog) take(job string, tick time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := hitKey{job, tick.Unix()}
	ids := h.runs[k]
	delete(h.runs, k)
	return ids
}

// forget drops what is left of ticks up to until: ticks of schedules the
// accounting left out.
func (h *hitLog) forget(until time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.runs {
		if k.tick <= until.Unix() {
			delete(h.runs, k)
		}
	}
}

// scheduleBook is the runtime schedules as the test put them: each one's
// schedule, and when it was last put, replaced or deleted.
type scheduleBook struct {
	p      soakPlan
	prefix string
	hour   int // UTC, at the start
	mu     sync.Mutex
	byID   map[string]*booked
	ids    []string // live ids, for picking one
	seq    int      // ids made so far
	ops    map[string]int
	// the first change that failed
	firstErr error
}

type booked struct {
	n       int // the spec's number (specFor)
	spec    string
	sched   scheduler.Schedule
	touched time.Time
}

func newScheduleBook(p soakPlan, prefix string) *scheduleBook {
	return &scheduleBook{p: p, prefix: prefix, hour: time.Now().UTC().Hour(), byID: map[string]*booked{}, ops: map[string]int{}}
}

// specFor is schedule n's: one in p.ticking is spread over the period
// (period/second slots, each taken by about as many schedules), the others
// are daily at an hour twelve hours off, which the run never reaches.
func (b *scheduleBook) specFor(n int) string {
	if n%b.p.ticking != 0 {
		return fmt.Sprintf("%d %d %d * * *", n%60, n/60%60, (b.hour+12)%24)
	}
	secs := int(b.p.period / time.Second)
	slot := n / b.p.ticking % secs
	if secs < 60 {
		return fmt.Sprintf("%d/%d * * * * *", slot, secs)
	}
	return fmt.Sprintf("%d %d/%d * * * *", slot%60, slot/60, secs/60)
}

// put puts schedule id with schedule n's spec and books it.
func (b *scheduleBook) put(ctx context.Context, c *baton.Cluster, id string, n int) error {
	spec := b.specFor(n)
	sched, err := scheduler.ParseSchedule(spec, time.UTC)
	if err != nil {
		return err
	}
	retries := 1
	def := baton.ScheduleSpec{Schedule: spec, Timeout: 10 * time.Second, MaxRetry: &retries, HTTP: &config.HTTPSpec{URL: b.prefix + "hook"}}
	if _, err := c.PutSchedule(ctx, id, def); err != nil {
		return fmt.Errorf("put %s: %w", id, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.byID[id]; !ok {
		b.ids = append(b.ids, id)
	}
	b.byID[id] = &booked{n: n, spec: spec, sched: sched, touched: time.Now()}
	return nil
}

func (b *scheduleBook) newID() (string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	return fmt.Sprintf("t/%06d", b.seq), b.seq
}

// putAll puts the first p.schedules, 64 at a time.
func (b *scheduleBook) putAll(ctx context.Context, c *baton.Cluster) error {
	work := make(chan int)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range work {
				id, n := b.newID()
				if err := b.put(ctx, c, id, n); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for range b.p.schedules {
		select {
		case work <- 0:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	return errors.Join(err, <-errs)
}

// churnUntil puts, replaces or deletes one schedule each p.churn until end
// (or ctx ends): a third of each, so the count stays about p.schedules.
func (b *scheduleBook) churnUntil(ctx context.Context, c *baton.Cluster, end time.Time) {
	tick := time.NewTicker(b.p.churn)
	defer tick.Stop()
	for i := 0; time.Now().Before(end); i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		b.mu.Lock()
		var id string
		if len(b.ids) > 0 {
			id = b.ids[(i*7919)%len(b.ids)]
		}
		b.mu.Unlock()
		if id == "" {
			continue
		}
		var err error
		switch i % 3 {
		case 0: // replace: another second, of the period or of the day
			err = b.put(ctx, c, id, b.replacement(id, i))
			b.count("replaced")
		case 1:
			err = b.delete(ctx, c, id)
			b.count("deleted")
		default:
			nid, n := b.newID()
			err = b.put(ctx, c, nid, n)
			b.count("put")
		}
		if err != nil && ctx.Err() == nil {
			b.mu.Lock()
			b.ops["errors"]++
			if b.firstErr == nil {
				b.firstErr = err
			}
			b.mu.Unlock()
		}
	}
}

// replacement is the spec number schedule id is replaced with at churn
// step i: another time of the same kind, ticking in the run or daily, as a
// customer moves their report's time. A replace that turned daily
// schedules into ticking ones would grow what the ticking ones keep (a
// mark, the fences, their stats) for hours, toward one per schedule: a
// load that changes, not a steady one.
func (b *scheduleBook) replacement(id string, i int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := i * b.p.ticking
	if bk := b.byID[id]; bk != nil && bk.n%b.p.ticking != 0 {
		n++
	}
	return n
}

func (b *scheduleBook) count(op string) {
	b.mu.Lock()
	b.ops[op]++
	b.mu.Unlock()
}

func (b *scheduleBook) delete(ctx context.Context, c *baton.Cluster, id string) error {
	b.mu.Lock()
	bk := b.byID[id]
	b.mu.Unlock()
	if bk == nil {
		return nil
	}
	if err := c.DeleteSchedule(ctx, id, false); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.byID, id)
	b.ids = slices.DeleteFunc(b.ids, func(s string) bool { return s == id })
	return nil
}

// followed bounds how long after a put every replica runs the schedule
// put (the replicas follow the store's change stream within a second).
const followed = 3 * time.Second

// steady lists the schedules untouched since before from (by followed),
// with their ticks in [from, to].
func (b *scheduleBook) steady(from, to time.Time) map[string][]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string][]time.Time{}
	for id, bk := range b.byID {
		if bk.touched.Before(from.Add(-followed)) {
			out[id] = scheduler.Ticks(bk.sched, from.Add(-time.Nanosecond), to, 100)
		}
	}
	return out
}

// ledgerCheck tallies what became of every tick of the accounted windows.
type ledgerCheck struct {
	cluster *baton.Cluster
	queue   *redis.Client
	ns      string
	names   []string
	hits    *hitLog
	book    *scheduleBook

	from, to  time.Time
	list      map[baton.Outcome]int // the job list's ticks by outcome
	runtime   map[baton.Outcome]int // the runtime schedules' ticks by outcome (ok: seen by the server)
	left      int                   // runtime schedules' ticks left out: their schedule changed
	bad       []string              // ticks not accounted for, or run twice
	badCount  int
	lookups   int // runtime ticks the server did not see, looked up in their ledger
	dupRuns   int
	listTicks int
	rtTicks   int
}

// accountedFor: a tick that ran (and how it ended is recorded), or one
// recorded not run, with why. Anything else, past the tick's starting
// deadline, is a tick baton lost track of.
func accountedFor(o baton.Outcome) bool {
	switch o {
	case baton.OutcomeOK, baton.OutcomeFailed, baton.OutcomeSkipped, baton.OutcomeReplaced, baton.OutcomeDropped,
		baton.OutcomeMissed, baton.OutcomePaused, baton.OutcomeRefused, baton.OutcomeStopped:
		return true
	}
	return false
}

func (a *ledgerCheck) flag(format string, args ...any) {
	a.badCount++
	if len(a.bad) < 30 {
		a.bad = append(a.bad, fmt.Sprintf(format, args...))
	}
}

// window accounts for the ticks due in [from, to].
func (a *ledgerCheck) window(t *testing.T, ctx context.Context, from, to time.Time) {
	t.Helper()
	if a.list == nil {
		a.list, a.runtime, a.from = map[baton.Outcome]int{}, map[baton.Outcome]int{}, from
	}
	a.to = to
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	ls, err := a.cluster.TicksAll(rctx, from, to)
	if err != nil {
		t.Errorf("the ledger of %v..%v: %v", from.Format(time.TimeOnly), to.Format(time.TimeOnly), err)
		return
	}
	for _, l := range ls {
		for _, w := range l.Warnings {
			t.Logf("ledger of %s: %s", l.Job, w)
		}
		for _, tk := range l.Ticks {
			if tk.Manual {
				continue
			}
			a.listTicks++
			a.list[tk.Outcome]++
			if !accountedFor(tk.Outcome) {
				a.flag("%s@%s: %s %s", l.Job, tk.Tick.Format(time.RFC3339), tk.Outcome, tk.Reason)
			}
		}
	}
	// a tick run twice: two run ids in the history
	hist, err := history.ReadJobsSince(rctx, a.queue, a.ns, a.names, from.Add(-time.Minute))
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		t.Errorf("the history of %v..%v: %s", from.Format(time.TimeOnly), to.Format(time.TimeOnly), first)
	}
	for job, recs := range hist {
		runs := map[int64][]string{}
		for _, r := range recs {
			if r.Manual || r.RunID == "" || r.Tick.Before(from) || r.Tick.After(to) || slices.Contains(runs[r.Tick.Unix()], r.RunID) {
				continue
			}
			runs[r.Tick.Unix()] = append(runs[r.Tick.Unix()], r.RunID)
		}
		for tick, ids := range runs {
			if len(ids) > 1 {
				a.dupRuns++
				a.flag("%s@%s ran %d times: %v", job, time.Unix(tick, 0).UTC().Format(time.RFC3339), len(ids), ids)
			}
		}
	}
	a.runtimeWindow(rctx, from, to)
}

// maxLookups bounds the ledger reads of one window (one round trip each):
// a tick the server did not see is rare, or the soak has failed already.
const maxLookups = 100

// runtimeWindow accounts for the steady runtime schedules' ticks of [from, to].
func (a *ledgerCheck) runtimeWindow(ctx context.Context, from, to time.Time) {
	steady := a.book.steady(from, to)
	lookups := 0
	for id, ticks := range steady {
		job := config.ScheduleJobName(id)
		for _, tick := range ticks {
			a.rtTicks++
			switch ids := a.hits.take(job, tick); {
			case len(ids) == 1:
				a.runtime[baton.OutcomeOK]++
			case len(ids) > 1:
				a.dupRuns++
				a.flag("%s@%s ran %d times: %v", job, tick.Format(time.RFC3339), len(ids), ids)
			case lookups >= maxLookups:
				a.flag("%s@%s: not seen by the server (beyond %d lookups in the window)", job, tick.Format(time.RFC3339), maxLookups)
			default:
				lookups++
				a.lookups++
				l, err := a.cluster.Ticks(ctx, job, tick, tick)
				if err != nil || len(l.Ticks) == 0 {
					a.flag("%s@%s: not run, and its ledger not read: %v", job, tick.Format(time.RFC3339), err)
					continue
				}
				tk := l.Ticks[0]
				a.runtime[tk.Outcome]++
				// ok without a call seen: a run of the server's would have
				// been seen, so it is not what the ledger says
				if !accountedFor(tk.Outcome) || tk.Outcome == baton.OutcomeOK {
					a.flag("%s@%s: not seen by the server; the ledger: %s %s", job, tick.Format(time.RFC3339), tk.Outcome, tk.Reason)
				}
			}
		}
	}
	a.book.mu.Lock()
	total := len(a.book.byID)
	a.book.mu.Unlock()
	a.left += total - len(steady)
	a.hits.forget(to)
}

func (a *ledgerCheck) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: ledger of the ticks due %s..%s UTC\n", a.from.UTC().Format(time.DateTime), a.to.UTC().Format(time.DateTime))
	fmt.Fprintf(&b, "soak:   job list: %d ticks, %s\n", a.listTicks, outcomes(a.list))
	fmt.Fprintf(&b, "soak:   runtime schedules: %d ticks of unchanged schedules, %s (%d looked up in their ledgers; %d schedule-windows left out: put, replaced or deleted within them)\n",
		a.rtTicks, outcomes(a.runtime), a.lookups, a.left)
	fmt.Fprintf(&b, "soak:   not accounted for or run twice: %d (%d run twice)\n", a.badCount, a.dupRuns)
	a.book.mu.Lock()
	fmt.Fprintf(&b, "soak:   runtime schedule changes: %v; %d schedules at the end\n", a.book.ops, len(a.book.byID))
	a.book.mu.Unlock()
	return b.String()
}

func outcomes(m map[baton.Outcome]int) string {
	var parts []string
	for o, n := range m {
		parts = append(parts, fmt.Sprintf("%s %d", o, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// verdict fails the test for every tick not accounted for or run twice,
// and for a soak that accounted for none.
func (a *ledgerCheck) verdict(t *testing.T) {
	t.Helper()
	if a.listTicks == 0 || a.rtTicks == 0 {
		t.Errorf("the ledger accounted for %d job-list ticks and %d runtime schedule ticks: want some of each", a.listTicks, a.rtTicks)
	}
	if a.badCount > 0 {
		t.Errorf("%d ticks not accounted for or run twice; the first:\n%s", a.badCount, strings.Join(a.bad, "\n"))
	}
	if n := a.book.ops["errors"]; n > 0 {
		t.Errorf("%d runtime schedule changes failed; the first: %v", n, a.book.firstErr)
	}
}
