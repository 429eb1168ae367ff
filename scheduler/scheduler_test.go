package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(redistest.GoleakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// recorder is a Dispatcher that records every tick it is handed, the way
// asynq would dedupe them by tick ID: a second dispatch of one ID is counted
// as a duplicate.
type recorder struct {
	mu    sync.Mutex
	ticks map[string][]scheduler.Tick
	order []scheduler.Tick // in dispatch order
	n     chan struct{}
	fail  atomic.Int64 // fail this many dispatches first
}

func newRecorder() *recorder {
	return &recorder{ticks: map[string][]scheduler.Tick{}, n: make(chan struct{}, 100000)}
}

func (r *recorder) Dispatch(_ context.Context, t scheduler.Tick) error {
	if r.fail.Add(-1) >= 0 {
		return errors.New("queue down")
	}
	r.mu.Lock()
	r.ticks[t.ID()] = append(r.ticks[t.ID()], t)
	r.order = append(r.order, t)
	r.mu.Unlock()
	r.n <- struct{}{}
	return nil
}

// wait waits until n dispatches happened in all.
func (r *recorder) wait(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-r.n:
		case <-timeout:
			t.Fatalf("only %d of %d dispatches", i, n)
		}
	}
}

// waitAdvancing waits for n dispatches while moving the fake clock on in
// small steps, for retries that wait on it (split votes, busy leases).
func (r *recorder) waitAdvancing(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for got := 0; got < n; {
		select {
		case <-r.n:
			got++
		case <-time.After(20 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d dispatches", got, n)
			}
			clk.Advance(25 * time.Millisecond)
		}
	}
}

// dispatched returns the ticks in dispatch order.
func (r *recorder) dispatched() []scheduler.Tick {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]scheduler.Tick(nil), r.order...)
}

func (r *recorder) snapshot() map[string][]scheduler.Tick {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string][]scheduler.Tick{}
	for k, v := range r.ticks {
		out[k] = append([]scheduler.Tick(nil), v...)
	}
	return out
}

type replica struct {
	s      *scheduler.Scheduler
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// stop ends the replica and waits for Run to return (once).
func (r *replica) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

// start runs a scheduler replica over the masters until the test ends.
func start(t *testing.T, rdbs []*redis.Client, jobs []scheduler.Job, d scheduler.Dispatcher, opts ...scheduler.Option) *replica {
	t.Helper()
	ms := make([]redis.UniversalClient, len(rdbs))
	for i, r := range rdbs {
		ms[i] = r
	}
	locks, err := locking.NewQuorum(ms, locking.WithPrefix("baton:lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, locks, jobs, d, opts...)
}

// startWith runs a scheduler replica over locks (closed when it stops)
// until the test ends.
func startWith(t *testing.T, locks *locking.Client, jobs []scheduler.Job, d scheduler.Dispatcher, opts ...scheduler.Option) *replica {
	t.Helper()
	s, err := scheduler.New(locks, jobs, d, opts...)
	if err != nil {
		_ = locks.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{s: s, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx); locks.Close() }()
	t.Cleanup(r.stop)
	return r
}

func every(t *testing.T, spec string) scheduler.Schedule {
	s, err := scheduler.ParseSchedule(spec, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// now is the real time truncated to the second: fake clocks start there so
// that Redis TIME (which decides "missed") agrees with them.
func now() time.Time { return time.Now().Truncate(time.Second) }

// Three replicas, one clock: every tick of every job is dispatched exactly once.
func TestExactlyOnceAcrossReplicas(t *testing.T) {
	srv := redistest.New(t)
	clk := clock.NewFake(now())
	rec := newRecorder()
	jobs := []scheduler.Job{
		{Name: "a", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute},
		{Name: "b", Schedule: every(t, "*/2 * * * * *"), StartingDeadline: time.Minute},
	}
	for i := range 3 {
		start(t, []*redis.Client{srv.TestClient(t)}, jobs, rec, scheduler.WithClock(clk),
			scheduler.WithReplica(fmt.Sprintf("r%d", i)), scheduler.WithMaxClockSkew(time.Hour),
			scheduler.WithFollowerDelay(100*time.Millisecond))
	}
	waited := 0
	for range 10 {
		// each replica waits on: its tick timer, membership, skew and held-tick timers
		if err := clk.BlockUntil(12); err != nil {
			t.Fatal(err)
		}
		from := clk.Now()
		clk.Advance(time.Second)
		due := 0
		for _, j := range jobs {
			due += len(scheduler.Ticks(j.Schedule, from, clk.Now(), 10))
		}
		rec.wait(t, due)
		waited += due
		clk.Advance(100 * time.Millisecond) // followers claim and find it done
	}
	got := rec.snapshot()
	for id, ticks := range got {
		if len(ticks) != 1 {
			t.Errorf("tick %s dispatched %d times", id, len(ticks))
		}
	}
	if len(got) != waited {
		t.Errorf("%d ticks dispatched, want %d", len(got), waited)
	}
}

// An owner that dies after claiming, before dispatching, loses nothing: the
// next replica waits for its lease to expire and dispatches the tick.
func TestOwnerDiesBeforeDispatch(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	rec := newRecorder()
	jobs := []scheduler.Job{{Name: "d", Schedule: every(t, "@every 1s"), StartingDeadline: 30 * time.Second}}
	start(t, []*redis.Client{rdb}, jobs, rec, scheduler.WithReplica("live"))
	// a tick at least a second ahead of the running replica (on a loaded
	// machine its start may take longer than any fixed margin before it)
	tick := time.Now().Add(2 * time.Second).Truncate(time.Second)
	lease := fmt.Sprintf("baton:{d}:tick:%d", tick.UnixMilli())
	// the dead owner's lease on the coming tick ends a moment after it is due
	if err := rdb.Set(ctx, lease, "dead-owner", time.Until(tick)+300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	id := "d@" + tick.UTC().Format(time.RFC3339)
	poll.Require(t, 30*time.Second, "tick "+id+" dispatched", func() bool { return len(rec.snapshot()[id]) > 0 })
	if got := rec.snapshot(); len(got[id]) != 1 {
		t.Fatalf("tick %s dispatched %d times (all: %v)", id, len(got[id]), got)
	}
}

func TestCatchupPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy scheduler.Catchup
		max    int
		want   int
	}{{scheduler.CatchupSkip, 0, 0}, {scheduler.CatchupLatest, 0, 1}, {scheduler.CatchupAll, 3, 3}, {scheduler.CatchupAll, 10, 6}} {
		t.Run(fmt.Sprintf("%s-%d", tc.policy, tc.max), func(t *testing.T) {
			srv := redistest.New(t)
			rdb := srv.TestClient(t)
			// the replicas' clock runs 2-3s ahead of Redis's, which judges
			// the starting deadline: a slow machine still claims the oldest
			// tick kept before Redis finds it missed
			n := now().Add(3 * time.Second)
			// every replica was down for 15 ticks: the last 6 are within the deadline
			rdb.Set(context.Background(), "baton:{c}:mark", n.Add(-15*time.Second).UnixMilli(), 0)
			rec := newRecorder()
			clk := clock.NewFake(n.Add(100 * time.Millisecond))
			jobs := []scheduler.Job{{Name: "c", Schedule: every(t, "@every 1s"), StartingDeadline: 5500 * time.Millisecond,
				Catchup: tc.policy, CatchupMax: tc.max}}
			r := start(t, []*redis.Client{rdb}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
			rec.wait(t, tc.want)
			// the ticks the policy leaves out are claimed as dropped, which
			// records and counts them missed
			waitFor(t, func() bool { return r.s.Stats().Missed == int64(15-tc.want) }, "the dropped ticks counted")
			r.stop()
			got := rec.snapshot()
			if len(got) != tc.want {
				t.Fatalf("%d ticks caught up, want %d: %v", len(got), tc.want, got)
			}
			if tc.want > 0 {
				last := "c@" + n.UTC().Format(time.RFC3339)
				if len(got[last]) != 1 {
					t.Fatalf("the latest missed tick %s was not caught up: %v", last, got)
				}
			}
			if st := r.s.Stats(); st.Missed != int64(15-tc.want) {
				t.Errorf("missed = %d, want %d", st.Missed, 15-tc.want)
			}
		})
	}
}

// Schedule (a restart after a replace):
//  1. job c's old definition ticked until n-15s (its mark); the others
//     replicas decided its ticks as it stood then;
//  2. c is replaced at n-2s (@every 1s, catchup all): the new definition's
//     Since; the old one is known to no replica any more;
//  3. a replica starts at n+100ms holding only the new definition.
//
// Its catch-up lists the ticks from the mark: the new definition's ticks
// n-14s..n-3s were never due (the definition did not exist then; the old
// one's ticks were the others' to decide), yet it counted those past the
// deadline missed (with a counted mark on the first master each time) and
// dispatched those within it. It must start at Since: n-2s, n-1s, n.
func TestCatchupStartsAtTheDefinitionsSince(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	n := now().Add(3 * time.Second) // ahead of Redis's clock, as in TestCatchupPolicies
	rdb.Set(context.Background(), "baton:{c}:mark", n.Add(-15*time.Second).UnixMilli(), 0)
	rec := newRecorder()
	clk := clock.NewFake(n.Add(100 * time.Millisecond))
	jobs := []scheduler.Job{{Name: "c", Schedule: every(t, "@every 1s"), StartingDeadline: 5500 * time.Millisecond,
		Catchup: scheduler.CatchupAll, CatchupMax: 10, Since: n.Add(-2 * time.Second)}}
	r := start(t, []*redis.Client{rdb}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	rec.wait(t, 3)
	if err := clk.BlockUntil(3); err != nil {
		t.Fatal(err)
	}
	r.stop()
	got := rec.snapshot()
	for _, sec := range []int{-2, -1, 0} {
		if id := "c@" + n.Add(time.Duration(sec)*time.Second).UTC().Format(time.RFC3339); len(got[id]) != 1 {
			t.Errorf("%s dispatched %d times, want 1", id, len(got[id]))
		}
	}
	if len(got) != 3 {
		t.Errorf("caught up %d ticks, want the 3 since the replace: %v", len(got), got)
	}
	if st := r.s.Stats(); st.Missed != 0 || st.CaughtUp != 3 {
		t.Errorf("missed %d, caught up %d; want 0 and 3", st.Missed, st.CaughtUp)
	}
	if keys, _ := rdb.Keys(context.Background(), "baton:{c}:counted:*").Result(); len(keys) != 0 {
		t.Errorf("counted marks %v written for ticks never due", keys)
	}
}

func TestPausedJobSkipsTicks(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	rdb.Set(context.Background(), scheduler.PauseKey("baton", "p"), "1", 0)
	clk := clock.NewFake(now())
	rec := newRecorder()
	jobs := []scheduler.Job{
		{Name: "p", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute},
		{Name: "q", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, Paused: true},
		{Name: "r", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute},
	}
	r := start(t, []*redis.Client{rdb}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	for range 3 {
		if err := clk.BlockUntil(4); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		rec.wait(t, 1)
	}
	for id := range rec.snapshot() {
		if id[0] != 'r' {
			t.Fatalf("paused job dispatched: %s", id)
		}
	}
	r.stop()
	if st := r.s.Stats(); st.Paused < 4 {
		t.Fatalf("paused = %d, want >= 4", st.Paused)
	}
}

// A failed dispatch releases the tick; it is tried again and dispatched once.
func TestDispatchFailureRetries(t *testing.T) {
	srv := redistest.New(t)
	rec := newRecorder()
	rec.fail.Store(2)
	jobs := []scheduler.Job{{Name: "f", Schedule: every(t, "@every 1s"), StartingDeadline: 30 * time.Second}}
	r := start(t, []*redis.Client{srv.TestClient(t)}, jobs, rec)
	rec.wait(t, 3)
	r.stop()
	seen := map[string]int{}
	for id, ticks := range rec.snapshot() {
		seen[id] = len(ticks)
		if len(ticks) != 1 {
			t.Fatalf("tick %s dispatched %d times", id, len(ticks))
		}
	}
	if st := r.s.Stats(); st.DispatchErrors != 2 {
		t.Fatalf("dispatch errors = %d, want 2", st.DispatchErrors)
	}
}

// A replica whose clock is off Redis TIME by more than the bound stops claiming.
func TestSkewedReplicaStopsClaiming(t *testing.T) {
	srv := redistest.New(t)
	clk := clock.NewFake(now().Add(10 * time.Second))
	rec := newRecorder()
	jobs := []scheduler.Job{{Name: "s", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute}}
	r := start(t, []*redis.Client{srv.TestClient(t)}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Second))
	poll.Require(t, 10*time.Second, "a replica 10s off Redis TIME to notice", r.s.Skewed)
	if err := clk.BlockUntil(3); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := clk.BlockUntil(3); err != nil {
		t.Fatal(err)
	}
	r.stop()
	if n := len(rec.snapshot()); n != 0 {
		t.Fatalf("a skewed replica dispatched %d ticks", n)
	}
}

// With a quorum of lock masters, one of them down, ticks still go out once.
func TestQuorumMastersExactlyOnce(t *testing.T) {
	servers := redistest.NewN(t, 3)
	clk := clock.NewFake(now())
	rec := newRecorder()
	jobs := []scheduler.Job{{Name: "q", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute}}
	for i := range 3 {
		var rdbs []*redis.Client
		for _, s := range servers {
			rdbs = append(rdbs, s.TestClient(t))
		}
		start(t, rdbs, jobs, rec, scheduler.WithClock(clk), scheduler.WithReplica(fmt.Sprintf("r%d", i)),
			scheduler.WithMaxClockSkew(time.Hour), scheduler.WithFollowerDelay(0))
	}
	for step := range 6 {
		if step == 3 {
			if err := servers[2].Kill(); err != nil {
				t.Fatal(err)
			}
		}
		if err := clk.BlockUntil(12); err != nil {
			t.Fatal(err)
		}
		clk.Set(clk.Now().Truncate(time.Second).Add(time.Second))
		rec.waitAdvancing(t, clk, 1) // three replicas at once split votes now and then
	}
	for id, ticks := range rec.snapshot() {
		if len(ticks) != 1 {
			t.Fatalf("tick %s dispatched %d times", id, len(ticks))
		}
	}
}

// A LeaderOnly job is claimed only by the replica that leads.
func TestLeaderOnlyJob(t *testing.T) {
	srv := redistest.New(t)
	clk := clock.NewFake(now())
	rec := newRecorder()
	jobs := []scheduler.Job{{Name: "m", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, LeaderOnly: true}}
	var leading atomic.Bool
	leading.Store(true)
	start(t, []*redis.Client{srv.TestClient(t)}, jobs, rec, scheduler.WithClock(clk), scheduler.WithReplica("leader"),
		scheduler.WithMaxClockSkew(time.Hour), scheduler.WithLeader(leading.Load))
	start(t, []*redis.Client{srv.TestClient(t)}, jobs, rec, scheduler.WithClock(clk), scheduler.WithReplica("other"),
		scheduler.WithMaxClockSkew(time.Hour), scheduler.WithLeader(func() bool { return false }))
	for range 3 {
		// each replica's tick, membership, skew and held-tick timers: with
		// fewer, a replica whose loop had not read the clock yet read it
		// after the advance and never saw this tick due
		if err := clk.BlockUntil(8); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		rec.wait(t, 1)
	}
	for id, ticks := range rec.snapshot() {
		if len(ticks) != 1 || ticks[0].Replica != "leader" {
			t.Fatalf("tick %s: %v", id, ticks)
		}
	}
	// leadership lost: nobody claims
	leading.Store(false)
	if err := clk.BlockUntil(8); err != nil {
		t.Fatal(err)
	}
	before := len(rec.snapshot())
	clk.Advance(time.Second)
	if err := clk.BlockUntil(8); err != nil {
		t.Fatal(err)
	}
	if got := len(rec.snapshot()); got != before {
		t.Fatalf("%d ticks dispatched without a leader", got-before)
	}
}

// gate is a Dispatcher that holds the first dispatch until released and
// records all of them.
type gate struct {
	entered chan string
	open    chan struct{}
	held    atomic.Bool
	rec     *recorder
}

func (g *gate) Dispatch(ctx context.Context, t scheduler.Tick) error {
	g.entered <- t.Job
	if g.held.CompareAndSwap(false, true) {
		select {
		case <-g.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.rec.Dispatch(ctx, t)
}

// Ticks owned by a live replica but waiting for a dispatch slot keep their
// leases (no other replica takes them over), and one whose lease was lost
// meanwhile is not dispatched by the replica that lost it.
func TestWaitingTicksKeepTheirLeases(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	clk := clock.NewFake(now())
	g := &gate{entered: make(chan string, 10), open: make(chan struct{}), rec: newRecorder()}
	jobs := []scheduler.Job{
		{Name: "a", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute},
		{Name: "b", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute},
		{Name: "c", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute},
	}
	ttl := time.Second
	r := start(t, []*redis.Client{rdb}, jobs, g, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour),
		scheduler.WithTickLeaseTTL(ttl), scheduler.WithDispatchParallelism(1))
	if err := clk.BlockUntil(4); err != nil { // tick, membership, skew and held-tick timers
		t.Fatal(err)
	}
	tick := scheduler.Ticks(jobs[0].Schedule, clk.Now(), clk.Now().Add(time.Minute), 1)[0]
	clk.Set(tick)
	var first string // holds the only dispatch slot
	select {
	case first = <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatalf("no tick of %v dispatched 30s after the fake clock reached it (timers waiting: %d)", tick, clk.Waiters())
	}
	var waiting []string
	for _, j := range jobs {
		if j.Name != first {
			waiting = append(waiting, j.Name)
		}
	}
	key := func(job string) string { return fmt.Sprintf("baton:{%s}:tick:%d", job, tick.UnixMilli()) }
	tokens := map[string]string{}
	for _, name := range waiting {
		tok, err := rdb.Get(ctx, key(name)).Result()
		if err != nil || tok == "done" {
			t.Fatalf("%s's tick key = %q, %v; want the owner's token", name, tok, err)
		}
		tokens[name] = tok
		// far beyond the ttl, so an extension shows as a shorter pttl
		rdb.PExpire(ctx, key(name), time.Hour)
	}
	if err := clk.BlockUntil(5); err != nil { // + the extension timer
		t.Fatal(err)
	}
	clk.Advance(ttl / 3)
	for _, name := range waiting {
		waitExtended(t, rdb, key(name), tokens[name], ttl)
	}
	// another replica took one tick over and dispatched it: that lease is
	// lost; the other is extended again in the same pipeline
	lost, kept := waiting[0], waiting[1]
	rdb.Set(ctx, key(lost), "done", time.Hour)
	rdb.PExpire(ctx, key(kept), time.Hour)
	if err := clk.BlockUntil(5); err != nil {
		t.Fatal(err)
	}
	clk.Advance(ttl / 3)
	waitExtended(t, rdb, key(kept), tokens[kept], ttl)
	close(g.open) // the first dispatch goes through, then the kept tick
	g.rec.wait(t, 2)
	r.stop()
	got := g.rec.snapshot()
	at := "@" + tick.UTC().Format(time.RFC3339)
	if len(got[first+at]) != 1 || len(got[kept+at]) != 1 || len(got[lost+at]) != 0 {
		t.Fatalf("dispatched %v; want %s and %s once, not %s (lease lost while waiting)", got, first, kept, lost)
	}
}

// waitExtended waits until the lease at key, set far beyond ttl by the test,
// has been extended to ttl by its owner (token).
func waitExtended(t *testing.T, rdb *redis.Client, key, token string, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, _ := rdb.Get(ctx, key).Result(); v != token {
			t.Fatalf("%s changed hands: %q", key, v)
		}
		pttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if pttl <= ttl {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never extended (pttl %v)", key, pttl)
		}
		time.Sleep(5 * time.Millisecond) // real time: the extension runs against Redis's clock
	}
}

// With a quorum, a tick's dispatch fence is the largest counter its owning
// masters answered; when they differ it is written back to a majority, so a
// later tick granted by other masters still gets a larger fence.
func TestQuorumFenceNeverGoesBack(t *testing.T) {
	servers := redistest.NewN(t, 3)
	ctx := context.Background()
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t))
	}
	// A and B counted few dispatches; C, once cut off, many more
	rdbs[0].Set(ctx, "baton:{f}:fence", 1000, 0)
	rdbs[1].Set(ctx, "baton:{f}:fence", 1000, 0)
	rdbs[2].Set(ctx, "baton:{f}:fence", int64(9e15), 0)
	clk := clock.NewFake(now())
	rec := newRecorder()
	// ticks a minute apart: the retries of one tick move the fake clock in
	// 25ms steps and never bring the next one due (a tick claimed before C
	// stops would take its fence from C)
	jobs := []scheduler.Job{{Name: "f", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}}
	start(t, rdbs, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	next := func() {
		t.Helper()
		if err := clk.BlockUntil(4); err != nil {
			t.Fatal(err)
		}
		clk.Set(clk.Now().Truncate(time.Minute).Add(time.Minute))
		rec.waitAdvancing(t, clk, 1)
	}
	next() // granted by A, B and C: fence from C
	if err := servers[2].Stop(); err != nil {
		t.Fatal(err)
	}
	next() // granted by A and B alone
	var ticks []scheduler.Tick
	for _, ts := range rec.snapshot() {
		ticks = append(ticks, ts[0])
	}
	if len(ticks) != 2 {
		t.Fatalf("%d ticks dispatched, want 2", len(ticks))
	}
	if ticks[1].At.Before(ticks[0].At) {
		ticks[0], ticks[1] = ticks[1], ticks[0]
	}
	if ticks[0].Fence <= 9e15 {
		t.Fatalf("first fence %d, want C's counter + 1", ticks[0].Fence)
	}
	if ticks[1].Fence <= ticks[0].Fence {
		t.Fatalf("the later tick got fence %d, not above the earlier %d", ticks[1].Fence, ticks[0].Fence)
	}
}

// After 48 hours without a replica, an @every 1s job with catch-up "latest"
// still catches up its latest tick: the live ticks are listed from the
// starting deadline on, not from the mark (whose first 100,000 ticks are
// all long past their deadline).
func TestCatchupAfterLongOutage(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	n := now().Add(3 * time.Second) // ahead of Redis's clock, as in TestCatchupPolicies
	rdb.Set(context.Background(), "baton:{c}:mark", n.Add(-48*time.Hour).UnixMilli(), 0)
	rec := newRecorder()
	clk := clock.NewFake(n.Add(100 * time.Millisecond))
	jobs := []scheduler.Job{{Name: "c", Schedule: every(t, "@every 1s"), StartingDeadline: 5500 * time.Millisecond,
		Catchup: scheduler.CatchupLatest}}
	r := start(t, []*redis.Client{rdb}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	rec.wait(t, 1)
	if err := clk.BlockUntil(3); err != nil {
		t.Fatal(err)
	}
	r.stop()
	last := "c@" + n.UTC().Format(time.RFC3339)
	if got := rec.snapshot(); len(got) != 1 || len(got[last]) != 1 {
		t.Fatalf("caught up %v, want only the latest tick %s", got, last)
	}
	if st := r.s.Stats(); st.CaughtUp != 1 || st.Missed < 100000 {
		t.Errorf("caught up %d, missed %d; want 1 and at least 100,000 counted", st.CaughtUp, st.Missed)
	}
}

// Pausing is decided by a quorum of lock masters, like owning: a pause flag
// on one master of three (a pause or resume that reached only it) does not
// pause the job, and the "paused" record that master keeps of a tick does
// not count as done; on two masters it pauses the job.
func TestPauseDecidedByQuorum(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t))
	}
	ctx := context.Background()
	rdbs[0].Set(ctx, scheduler.PauseKey("baton", "minority"), "1", 0)
	for _, r := range rdbs[:2] {
		r.Set(ctx, scheduler.PauseKey("baton", "majority"), "1", 0)
	}
	clock0 := now()
	clk := clock.NewFake(clock0)
	rec := newRecorder()
	// the first dispatch fails: its retry must not find the paused
	// master's record of the tick and take it for done
	rec.fail.Store(1)
	jobs := []scheduler.Job{
		{Name: "minority", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute},
		{Name: "majority", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute},
	}
	r := start(t, rdbs, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	for range 3 {
		if err := clk.BlockUntil(4); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
		rec.waitAdvancing(t, clk, 1)
	}
	r.stop()
	var ats []time.Time
	for id, ts := range rec.snapshot() {
		if strings.HasPrefix(id, "majority@") {
			t.Fatalf("job paused on a majority dispatched: %s", id)
		}
		ats = append(ats, ts[0].At)
	}
	slices.SortFunc(ats, time.Time.Compare)
	first := clock0.Truncate(time.Second).Add(time.Second)
	if len(ats) < 3 || !ats[0].Equal(first) {
		t.Fatalf("job paused on one master of three dispatched %v, want every tick from %v", ats, first)
	}
	for i := 1; i < len(ats); i++ {
		if ats[i].Sub(ats[i-1]) != time.Second {
			t.Fatalf("tick after %v not dispatched (the retry of a failed dispatch took the paused master's record for done): %v", ats[i-1], ats)
		}
	}
}

// warnings is a slog handler that keeps the text of every warning.
type warnings struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.lines = append(w.lines, r.Message)
	w.mu.Unlock()
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) find(s string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.lines {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// A job's dispatch fencing counter that holds no integer below 2^53 (here
// 2^63-1, which Lua's doubles would turn into a negative fence), a job
// mark that holds no time, or a tick that holds neither a record nor a
// claim token (read as a lease, it would keep the tick busy and unrecorded;
// each also as a key of another type)
// dispatches nothing: the tick is held back with a warning naming the
// master and the key, and once an operator deletes the key it is dispatched
// with a fence above every one issued before.
func TestCorruptFenceCounterHoldsTicksBack(t *testing.T) {
	begin := now()
	tick := "baton:{f}:tick:" + strconv.FormatInt(begin.Truncate(time.Minute).Add(time.Minute).UnixMilli(), 10)
	for _, tc := range []struct{ key, value string }{
		{"baton:{f}:fence", "9223372036854775807"},
		{"baton:{f}:fence", "1.5"},
		{"baton:{f}:mark", "abc"},
		{tick, "\x1b[2Jdone"},
		// keys of another type, which the claim's MGET reads as missing
		{"baton:{f}:fence", aHash},
		{"baton:{f}:mark", aHash},
		{tick, aHash},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) { corruptKeyHoldsTicksBack(t, begin, tc.key, tc.value) })
	}
}

// aHash, as the value of corruptKeyHoldsTicksBack, puts a hash at the key.
const aHash = "(a hash)"

func corruptKeyHoldsTicksBack(t *testing.T, begin time.Time, key, value string) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	if value == aHash {
		rdb.HSet(ctx, key, "f", "v")
	} else {
		rdb.Set(ctx, key, value, 0)
	}
	clk := clock.NewFake(begin)
	rec := newRecorder()
	w := &warnings{}
	jobs := []scheduler.Job{{Name: "f", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}}
	start(t, []*redis.Client{rdb}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour),
		scheduler.WithLogger(slog.New(w)))
	// the tick, membership, skew and held-tick timers: the loop has read the
	// clock, so the tick set next is due, not behind it
	if err := clk.BlockUntil(4); err != nil {
		t.Fatal(err)
	}
	clk.Set(clk.Now().Truncate(time.Minute).Add(time.Minute))
	due := clk.Now()
	var line string
	poll.Require(t, 20*time.Second, "a warning naming the corrupt counter", func() bool {
		// the clock moves through this tick's retries and no further than
		// half a period: a slow machine must not reach the next tick, whose
		// record is sound (and which is dispatched when the corrupt value
		// is the tick's own record)
		if clk.Now().Before(due.Add(30 * time.Second)) {
			clk.Advance(25 * time.Millisecond)
		}
		line = w.find("holding ticks back: a lock master holds a corrupt value")
		return line != ""
	})
	if !strings.Contains(line, strconv.Quote(key)) || !strings.Contains(line, srv.Addr()) {
		t.Fatalf("warning %q does not name the key %q and the master %s", line, key, srv.Addr())
	}
	if got := rec.dispatched(); len(got) != 0 {
		t.Fatalf("dispatched %v on a corrupt fencing counter", got)
	}
	rdb.Del(ctx, key)
	rec.waitAdvancing(t, clk, 1)
	if f := rec.dispatched()[0].Fence; f <= 0 || f >= 1<<53 {
		t.Fatalf("fence after the repair = %d", f)
	}
}

// A tick key that holds neither a record nor a claim token is reported and
// dispatches nothing, also on a master that restarted after the tick may
// have been recorded (where a claim abstains): the key is left for an
// operator, never written over, and never taken for a tick nobody can
// vouch for. Schedule: one master, or three; the first restarts empty
// and, repaired, votes again after its quarantine (its marker's BORN is
// its restart, so claims of ticks due before BORN + the skew bound abstain
// there); something writes a hash at the next tick's key on it; the tick
// falls due. The claim holds the tick back with a warning naming that
// master and the key, and leaves the hash as it is.
func TestCorruptTickOnARestartedMasterHoldsTicksBack(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("%d masters", n), func(t *testing.T) { corruptTickOnRestartedMaster(t, n) })
	}
}

func corruptTickOnRestartedMaster(t *testing.T, n int) {
	servers := redistest.NewN(t, n)
	rdbs := clients(t, servers)
	deployFresh(t, servers)
	ctx := context.Background()
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	locks, err := locking.NewQuorum(universal(rdbs), locking.WithRestartQuarantine(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// real time: the master is repaired and waits out its quarantine by
	// its clock
	poll.Require(t, 10*time.Second, "the restarted master voting after its quarantine", func() bool {
		_ = locks.Prepare(ctx) // repairs it (a lock call would)
		return locks.Masters(ctx)[0].State == locking.MasterVoting
	})
	if m := rdbs[0].Get(ctx, "baton:lock:marker").Val(); !strings.HasSuffix(m, " empty") {
		_ = locks.Close()
		t.Fatalf("marker %q: want one written after a restart empty", m)
	}

	begin := now()
	tick := "baton:{f}:tick:" + strconv.FormatInt(begin.Truncate(time.Minute).Add(time.Minute).UnixMilli(), 10)
	if err := rdbs[0].HSet(ctx, tick, "f", "v").Err(); err != nil {
		_ = locks.Close()
		t.Fatal(err)
	}
	clk := clock.NewFake(begin)
	rec := newRecorder()
	w := &warnings{}
	jobs := []scheduler.Job{{Name: "f", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}}
	startWith(t, locks, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour), scheduler.WithLogger(slog.New(w)))
	// the tick, membership, skew and held-tick timers: the loop has read the
	// clock, so the tick set next is due, not behind it
	if err := clk.BlockUntil(4); err != nil {
		t.Fatal(err)
	}
	clk.Set(clk.Now().Truncate(time.Minute).Add(time.Minute))
	due := clk.Now()
	var line, other string
	poll.Require(t, 20*time.Second, "a warning naming the corrupt tick, another verdict, or a dispatch", func() bool {
		// through this tick's retries, no further than half a period
		if clk.Now().Before(due.Add(30 * time.Second)) {
			clk.Advance(25 * time.Millisecond)
		}
		line = w.find("holding ticks back: a lock master holds a corrupt value")
		other = w.find("tick missed")
		return line != "" || other != "" || len(rec.dispatched()) > 0
	})
	if got := rec.dispatched(); len(got) != 0 {
		t.Errorf("dispatched %v over a tick key of another type on master %s", got, servers[0].Addr())
	}
	if typ := rdbs[0].Type(ctx, tick).Val(); typ != "hash" {
		t.Errorf("the corrupt tick key %s on master %s is now a %s: written over, want left as it was", tick, servers[0].Addr(), typ)
	}
	if line == "" || !strings.Contains(line, strconv.Quote(tick)) || !strings.Contains(line, servers[0].Addr()) {
		t.Errorf("warning %q (other: %q), want one naming the key %q and the master %s", line, other, tick, servers[0].Addr())
	}
}
