package jobs

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// Review of the buffering policies (issue 14): schedules that try to make
// kept ticks run out of order, twice, or beside another run.

// rankOf runs the buffer script's "rank" op for tick (which also drops the
// entries whose waiter stopped beating), as any worker's next call would.
func (e *env) rankOf(t *testing.T, job string, tick scheduler.Tick, ttl time.Duration) int64 {
	t.Helper()
	n, err := bufferScript.Run(context.Background(), e.rdb, bufKeys(job),
		"rank", tick.ID(), tick.At.UnixMilli(), ttl.Milliseconds(), 1).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Schedule (buffer_one, lock_ttl 1s):
//
//  1. a run holds the job (this test holds the execution lease).
//  2. tick 2 finds the job running: kept on worker B, the head of the
//     buffer, waiting in Lock.
//  3. worker B stalls past lock_ttl (here: its clock, which drives the
//     beats, stands still; a GC pause or CPU starvation does the same):
//     tick 2's entry lapses and is dropped as dead.
//  4. tick 3 finds the job running: kept on worker C (the slot is free).
//  5. worker B resumes: its beat finds the entry gone and joins again,
//     "back in line, beyond the bound if need be" (buffer.go) ... but
//     buffer.lua's join refuses a new entry in a full buffer (-1), which
//     keep ignores. Tick 2 is still waiting in Lock, now outside the
//     buffer, so no run sees it as older.
//  6. the run ends. Tick 2's and tick 3's waiters race for the lease; when
//     tick 3's wins (here B's lock client is 200ms slower), first() finds no
//     older kept tick and tick 3 runs before tick 2, which was kept first
//     and is older. (Both run: buffer_one kept two ticks, none dropped.)
func TestReviewBufferStalledWaiterKeepsItsPlace(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: slow
    schedule: "@every 1m"
    concurrency: buffer_one
    lock_ttl: 1s
    handler: {name: slow}
`)
	ctx := context.Background()
	running, err := e.locks.Lock(ctx, "exec:slow", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = running.Release(ctx) }()

	// worker B: its beats on a clock the test moves; its lock client a bit
	// slower than C's (a farther network), so C's waiter wins a race
	p := redistest.NewTestProxy(t, e.srv.Addr())
	slow := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer slow.Close()
	locksB, err := locking.New(slow, locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	defer locksB.Close()
	clkB := clock.NewFake(time.Now())
	execB := newFakeExec(nil)
	cfgB := *cfg
	cfgB.Worker.Concurrency = 1 // tick 2's wait takes B's one slot: tick 3 goes to C
	wB := NewWorker(&cfgB, e.opt, locksB, execB, WithReplica("B"), WithClock(clkB),
		WithPollIntervals(10*time.Millisecond, 20*time.Millisecond), WithLogger(testLogger(t)))
	if err := wB.Start(); err != nil {
		t.Fatal(err)
	}
	defer shutdownWithin(t, wB)

	t2, t3 := tickOf("slow", 2), tickOf("slow", 3)
	e.dispatch(t, cfg, t2)
	e.requireKept(t, "slow", t2)
	if err := p.AddLatency(200*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	// B stalls: no beat; the entry lapses within lock_ttl
	poll.Require(t, wait, "tick 2's entry dropped as dead", func() bool { return e.rankOf(t, "slow", t2, time.Second) < 0 })

	gate := make(chan struct{})
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	execC := newFakeExec(blockUntil(gate))
	e.worker(t, cfg, execC, WithReplica("C"))
	e.dispatch(t, cfg, t3)
	e.requireKept(t, "slow", t3)

	// B resumes: its beat finds the entry gone and joins again
	clkB.Advance(time.Second)
	var kept []string
	poll.Until(time.Second, func() bool { kept = e.kept(t, "slow"); return len(kept) == 2 })
	t.Logf("kept after B's beat: %v", kept)

	if err := running.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var first started
	var who string
	select {
	case first = <-execB.started:
		who = "B"
	case first = <-execC.started:
		who = "C"
	case <-time.After(wait):
		t.Fatal("no run after the job was freed")
	}
	t.Logf("first run: %s on %s", first.run.Tick.Format(time.RFC3339), who)
	if !first.run.Tick.Equal(t2.At) {
		t.Errorf("tick %s ran first, while the older kept tick %s waited (buffer: %v): kept ticks must run oldest first; "+
			"B's join after its stall was refused by the bound and ignored", first.run.Tick.Format(time.RFC3339), t2.ID(), kept)
	}
	close(gate)
	// whatever ran first, the other runs next: both kept ticks of buffer_one run
	select {
	case <-execB.started:
	case <-execC.started:
	case <-time.After(wait):
	}
	if s := wB.Stats(); s.Dropped != 0 {
		t.Logf("B stats %+v", s)
	}
}

// shutdownWithin shuts w down within wait, failing the test on an error.
func shutdownWithin(t *testing.T, w *Worker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := w.Shutdown(ctx); err != nil && !strings.Contains(err.Error(), "already shut down") {
		t.Errorf("Shutdown: %v", err)
	}
}

// forbid and replace jobs never touch a buffer: a tick that finds the job
// running is skipped (forbid) or replaces the run (replace), and no buffer
// keys appear. (Held.)
func TestReviewBufferKeysOnlyForBufferingJobs(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(t, `  - name: fb
    schedule: "@every 1m"
    lock_ttl: 1s
    handler: {name: fb}
  - name: rp
    schedule: "@every 1m"
    concurrency: replace
    lock_ttl: 1s
    handler: {name: rp}
`)
	gate := make(chan struct{})
	defer close(gate)
	exec := newFakeExec(blockUntil(gate))
	w := e.worker(t, cfg, exec)
	e.dispatch(t, cfg, tickOf("fb", 1))
	recv(t, exec.started, "fb's first run")
	e.dispatch(t, cfg, tickOf("fb", 2))
	statusOf(t, e, tickOf("fb", 2), StatusSkipped)
	e.dispatch(t, cfg, tickOf("rp", 1))
	recv(t, exec.started, "rp's first run")
	e.dispatch(t, cfg, tickOf("rp", 2))
	if s := recv(t, exec.started, "rp's replacing run"); !s.run.Tick.Equal(tickOf("rp", 2).At) {
		t.Errorf("replacing run %+v", s.run)
	}
	statusOf(t, e, tickOf("rp", 1), StatusReplaced)
	n, err := e.rdb.Exists(context.Background(), append(bufKeys("fb"), bufKeys("rp")...)...).Result()
	if err != nil || n != 0 {
		t.Errorf("buffer keys of forbid/replace jobs: %d (%v)", n, err)
	}
	if st := w.Stats(); st.Dropped != 0 || st.Skipped != 1 || st.Replaced != 1 {
		t.Errorf("stats %+v", st)
	}
}
