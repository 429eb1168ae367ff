package scheduler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/scheduler"
)

// leaving is a Dispatcher that leaves its first `left` ticks to another
// replica's job list (ErrLeftToOthers), in Dispatch or, wrapped in
// prechecking, in Precheck; then it records them.
type leaving struct {
	mu          sync.Mutex
	left        int
	viaPrecheck bool
	asked       chan string
	rec         *recorder
}

func (l *leaving) take() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.left > 0 {
		l.left--
		return fmt.Errorf("another list takes it: %w", scheduler.ErrLeftToOthers)
	}
	return nil
}

func (l *leaving) Dispatch(ctx context.Context, t scheduler.Tick) error {
	l.asked <- "dispatch"
	if !l.viaPrecheck {
		if err := l.take(); err != nil {
			return err
		}
	}
	return l.rec.Dispatch(ctx, t)
}

type prechecking struct{ *leaving }

func (p prechecking) Precheck(context.Context, scheduler.Tick) error {
	p.asked <- "precheck"
	return p.take()
}

// passingPrecheck is a Prechecker whose Precheck lets every tick through:
// the limit is reached between its read and the dispatch (another tick of
// the job counted meanwhile), so Dispatch is the one that leaves the tick
// to another replica's job list.
type passingPrecheck struct{ *leaving }

func (p passingPrecheck) Precheck(context.Context, scheduler.Tick) error {
	p.asked <- "precheck"
	return nil
}

// A commit-first tick that passed its precheck and that the dispatcher then
// leaves to another replica's job list (the list's max_runs was reached
// between the two, while a live list would still run it) did not run: its
// record is withdrawn and its lease released, so a replica whose list takes
// it claims and runs it, instead of the tick staying "done" with no run.
func TestCommittedTickLeftToOthersStillRuns(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	clk := clock.NewFake(now())
	l := &leaving{left: 1, asked: make(chan string, 10), rec: newRecorder()}
	jobs := []scheduler.Job{{Name: "a", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute, CommitFirst: true}}
	ttl := time.Second
	r := start(t, []*redis.Client{rdb}, jobs, passingPrecheck{l}, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour),
		scheduler.WithTickLeaseTTL(ttl))
	if err := clk.BlockUntil(4); err != nil { // tick, membership, skew and held-tick timers
		t.Fatal(err)
	}
	tick := scheduler.Ticks(jobs[0].Schedule, clk.Now(), clk.Now().Add(time.Minute), 1)[0]
	clk.Set(tick)
	key := fmt.Sprintf("baton:{a}:tick:%d", tick.UnixMilli())
	poll.Require(t, 10*time.Second, "the tick taken after it was left to others", func() bool {
		if clk.Now().Before(tick.Add(5 * ttl)) {
			clk.Advance(50 * time.Millisecond)
		}
		return len(l.rec.snapshot()) > 0
	})
	poll.Require(t, 10*time.Second, "the tick recorded done", func() bool {
		v, err := rdb.Get(ctx, key).Result()
		return err == nil && v == "done"
	})
	r.stop()
	if got := l.rec.snapshot(); len(got) != 1 || len(got["a@"+tick.UTC().Format(time.RFC3339)]) != 1 {
		t.Fatalf("dispatched %v, want tick %v once", got, tick)
	}
	st := r.s.JobStats()["a"]
	if st.LeftToOthers != 1 || st.DispatchErrors != 0 || st.Missed != 0 {
		t.Fatalf("stats %+v: want 1 left to others, no dispatch error, none missed", st)
	}
}

// A tick the dispatcher leaves to another replica's job list is released
// unrecorded (a commit-first tick is not recorded before its run), counted
// as left and not as a failure, and looked at again a lease ttl later: here
// the dispatcher takes it then, and it is dispatched once and recorded done.
func TestTickLeftToOthersIsReleasedUnrecorded(t *testing.T) {
	for _, commitFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit first %v", commitFirst), func(t *testing.T) {
			srv := redistest.New(t)
			rdb := srv.TestClient(t)
			ctx := context.Background()
			clk := clock.NewFake(now())
			l := &leaving{left: 1, viaPrecheck: commitFirst, asked: make(chan string, 10), rec: newRecorder()}
			var d scheduler.Dispatcher = l
			if commitFirst {
				d = prechecking{l}
			}
			jobs := []scheduler.Job{{Name: "a", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute, CommitFirst: commitFirst}}
			ttl := time.Second
			r := start(t, []*redis.Client{rdb}, jobs, d, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour),
				scheduler.WithTickLeaseTTL(ttl))
			if err := clk.BlockUntil(4); err != nil { // tick, membership, skew and held-tick timers
				t.Fatal(err)
			}
			tick := scheduler.Ticks(jobs[0].Schedule, clk.Now(), clk.Now().Add(time.Minute), 1)[0]
			clk.Set(tick)
			if got := <-l.asked; commitFirst && got != "precheck" {
				t.Fatalf("a commit-first tick was first %sed, want prechecked before its record", got)
			}
			key := fmt.Sprintf("baton:{a}:tick:%d", tick.UnixMilli())
			poll.Require(t, 10*time.Second, "the tick's lease released", func() bool {
				n, err := rdb.Exists(ctx, key).Result()
				return err == nil && n == 0
			})
			// a lease ttl later (by the replica's clock) it is looked at again
			poll.Require(t, 10*time.Second, "the tick taken the second time", func() bool {
				if clk.Now().Before(tick.Add(5 * ttl)) {
					clk.Advance(50 * time.Millisecond)
				}
				return len(l.rec.snapshot()) > 0
			})
			poll.Require(t, 10*time.Second, "the tick recorded done", func() bool {
				v, err := rdb.Get(ctx, key).Result()
				return err == nil && strings.HasPrefix(v, "done")
			})
			r.stop()
			if got := l.rec.snapshot(); len(got) != 1 || len(got["a@"+tick.UTC().Format(time.RFC3339)]) != 1 {
				t.Fatalf("dispatched %v, want tick %v once", got, tick)
			}
			st := r.s.JobStats()["a"]
			if st.LeftToOthers != 1 || st.DispatchErrors != 0 || st.Missed != 0 {
				t.Fatalf("stats %+v: want 1 left to others, no dispatch error, none missed", st)
			}
		})
	}
}

// Jobs of one StatsGroup count together: JobStats reports the group once,
// under its name, with every dispatch of its jobs, and a job without a
// group under its own name; the group's count stays when a job of it is
// removed (a counter never goes back).
func TestJobsOfAStatsGroupCountTogether(t *testing.T) {
	srv := redistest.New(t)
	clk := clock.NewFake(now())
	rec := newRecorder()
	jobs := []scheduler.Job{
		{Name: "g1", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, StatsGroup: "@"},
		{Name: "g2", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute, StatsGroup: "@"},
		{Name: "solo", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute},
	}
	r := start(t, []*redis.Client{srv.TestClient(t)}, jobs, rec, scheduler.WithClock(clk), scheduler.WithMaxClockSkew(time.Hour))
	for range 2 {
		if err := clk.BlockUntil(4); err != nil { // tick, membership, skew and held-tick timers
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	rec.wait(t, 6)
	poll.Require(t, 10*time.Second, "the stats to count six dispatches", func() bool {
		js := r.s.JobStats()
		return js["@"].Dispatched == 4 && js["solo"].Dispatched == 2
	})
	js := r.s.JobStats()
	if _, ok := js["g1"]; ok || len(js) != 2 {
		t.Fatalf("JobStats %v: want the group \"@\" and solo", js)
	}
	r.s.Remove("g1")
	if got := r.s.JobStats()["@"].Dispatched; got != 4 {
		t.Fatalf("after a job of the group left: %d dispatched, want 4 still", got)
	}
}

// heldGate is a Dispatcher that holds every dispatch until open is closed,
// counting those it holds.
type heldGate struct {
	open    chan struct{}
	waiting atomic.Int64
	rec     *recorder
}

func (g *heldGate) Dispatch(ctx context.Context, t scheduler.Tick) error {
	g.waiting.Add(1)
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.rec.Dispatch(ctx, t)
}

// Schedule: 6,000 ticks come due at one instant on one replica whose
// dispatches are slow (here: held). The replica claims them chunk by
// chunk as it dispatches, never all at once: a tick waits for its chunk
// unclaimed, not leased (a million leases held while dispatches crept
// through them had to be extended every ttl/3, and the extensions starved
// the dispatches), and every tick is dispatched once when they flow.
func TestABigInstantIsClaimedAsItIsDispatched(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	const n = 6000
	jobs := minuteJobs(t, "j", n, false)
	h := heldInstant(t, rdb, jobs)
	g, release := h.g, h.release
	poll.Require(t, 30*time.Second, "the dispatches to be held", func() bool { return g.waiting.Load() >= 16 })
	leased := 0
	iter := rdb.Scan(context.Background(), 0, "baton:{j*}:tick:*", 1000).Iterator()
	for iter.Next(context.Background()) {
		if v, _ := rdb.Get(context.Background(), iter.Val()).Result(); v != "done" && !strings.HasSuffix(iter.Val(), ":by") {
			leased++
		}
	}
	if leased == 0 || leased > 5000 {
		t.Fatalf("%d of %d ticks leased while their dispatches wait: want them claimed a chunk or two at a time", leased, n)
	}
	release()
	g.rec.wait(t, n)
	for id, ticks := range g.rec.snapshot() {
		if len(ticks) != 1 {
			t.Fatalf("tick %s dispatched %d times", id, len(ticks))
		}
	}
}

// Schedule: a big instant's last chunk waits for its turn (the chunks
// before it hold their dispatches); meanwhile every job of it is removed
// (deleted runtime schedules). When its turn comes, none of its ticks is
// claimed or dispatched: a chunk drops the jobs no longer current.
func TestAJobRemovedWhileItsChunkWaitsIsNotClaimed(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	const n = 6000
	jobs := minuteJobs(t, "j", n, false)
	// one chunk in flight: the first claims and holds its dispatches, every
	// other waits for its turn
	h := heldInstant(t, rdb, jobs, scheduler.WithClaimsInFlight(1))
	r, g, at := h.r, h.g, h.at
	// the first chunk's claims answered (owned), its dispatches held
	claimed := func() int64 {
		n := int64(0)
		iter := rdb.Scan(ctx, 0, "baton:{j*}:tick:*", 1000).Iterator()
		for iter.Next(ctx) {
			if !strings.HasSuffix(iter.Val(), ":by") {
				n++
			}
		}
		return n
	}
	poll.Require(t, 30*time.Second, "the first chunk claimed", func() bool {
		owned := r.s.Stats().Owned
		return owned > 0 && g.waiting.Load() >= 16 && claimed() == owned
	})
	var removed []string
	for _, j := range jobs {
		if n, _ := rdb.Exists(ctx, scheduler.TickKey("baton", j.Name, at)).Result(); n == 0 {
			removed = append(removed, j.Name)
		}
	}
	if len(removed) == 0 {
		t.Fatal("every tick claimed at once: no chunk waited")
	}
	r.s.Remove(removed...)
	h.drainWaitingChunks(t)
	gone := map[string]bool{}
	for _, name := range removed {
		gone[name] = true
	}
	for id := range g.rec.snapshot() {
		if job, _, _ := strings.Cut(id, "@"); gone[job] {
			t.Fatalf("%s dispatched after its job was removed", id)
		}
	}
}

// Schedule: 12,500 ticks of other jobs come due at one instant (five
// chunks), their dispatches held: two chunks are claimed, three wait. A
// second later a small job's tick comes due, with a shorter starting
// deadline. When the dispatches flow, the small tick gets the first slot
// freed, ahead of the big instant's waiting chunks (whose deadlines are
// later), rather than waiting behind all of them until its deadline passes.
func TestASmallJobsTickIsNotMissedBehindABigInstant(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	const n = 12500
	jobs := make([]scheduler.Job, 0, n+1)
	for i := range n {
		jobs = append(jobs, scheduler.Job{Name: fmt.Sprintf("big%05d", i), Schedule: every(t, "0 * * * * *"), StartingDeadline: time.Hour})
	}
	jobs = append(jobs, scheduler.Job{Name: "small", Schedule: every(t, "1 * * * * *"), StartingDeadline: time.Minute})
	h := heldInstant(t, rdb, jobs)
	g, clk, at, release := h.g, h.clk, h.at, h.release
	poll.Require(t, 30*time.Second, "the big instant's dispatches to be held", func() bool { return g.waiting.Load() >= 16 })
	clk.Set(at.Add(time.Second))
	release()
	small := "small@" + at.Add(time.Second).UTC().Format(time.RFC3339)
	var before int
	poll.Require(t, 60*time.Second, "the small tick dispatched", func() bool {
		got := g.rec.snapshot()
		before = len(got)
		return len(got[small]) == 1
	})
	if before > 7501 { // two chunks, and what the other running chunk dispatched meanwhile
		t.Fatalf("the small tick was dispatched after %d of the big instant's %d: it waited behind the chunks due before it", before-1, n)
	}
}

// heldRun is a replica whose dispatches are held, at an instant of its
// jobs (heldInstant).
type heldRun struct {
	r       *replica
	g       *heldGate
	clk     *clock.Fake
	at      time.Time // the instant: the first job's next tick
	release func()    // lets the dispatches flow (once)
}

// heldInstant starts a replica of jobs on rdb (tick leases of a minute)
// whose dispatches g holds, on a fake clock it sets to the first job's next
// tick. The dispatches are released when the test ends, before the replica
// stops: a held dispatch would hold its shutdown.
func heldInstant(t *testing.T, rdb *redis.Client, jobs []scheduler.Job, opts ...scheduler.Option) heldRun {
	t.Helper()
	h := heldRun{g: &heldGate{open: make(chan struct{}), rec: newRecorder()}, clk: clock.NewFake(now())}
	h.r = start(t, []*redis.Client{rdb}, jobs, h.g, append([]scheduler.Option{scheduler.WithClock(h.clk),
		scheduler.WithMaxClockSkew(time.Hour), scheduler.WithTickLeaseTTL(time.Minute)}, opts...)...)
	var opened sync.Once
	h.release = func() { opened.Do(func() { close(h.g.open) }) }
	t.Cleanup(h.release)
	if err := h.clk.BlockUntil(4); err != nil { // tick, membership, skew and held-tick timers
		t.Fatal(err)
	}
	h.at = scheduler.Ticks(jobs[0].Schedule, h.clk.Now(), h.clk.Now().Add(2*time.Minute), 1)[0]
	h.clk.Set(h.at)
	return h
}

// minuteJobs is n jobs named prefix0000..., each due every minute with an
// hour's starting deadline, leader-only or not.
func minuteJobs(t *testing.T, prefix string, n int, leaderOnly bool) []scheduler.Job {
	t.Helper()
	jobs := make([]scheduler.Job, n)
	for i := range jobs {
		jobs[i] = scheduler.Job{Name: fmt.Sprintf("%s%04d", prefix, i), Schedule: every(t, "@every 1m"), StartingDeadline: time.Hour, LeaderOnly: leaderOnly}
	}
	return jobs
}

// Leader-only ticks (6,000, one chunk in flight) come due while this
// replica leads; the first chunk is claimed and its dispatches held, the
// others wait for their turn. The replica loses the lead meanwhile: when a
// waiting chunk gets its turn, its leader-only ticks are not claimed (the
// new leader's to claim), as the loop would not have claimed them then.
func TestALeaderOnlyChunkThatWaitsPastTheLeadIsNotClaimed(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	const n = 6000
	jobs := minuteJobs(t, "l", n, true)
	var leading atomic.Bool
	leading.Store(true)
	h := heldInstant(t, rdb, jobs, scheduler.WithClaimsInFlight(1), scheduler.WithLeader(leading.Load))
	r, g, at := h.r, h.g, h.at
	claimed := func() int64 {
		n := int64(0)
		for _, j := range jobs {
			if e, _ := rdb.Exists(ctx, scheduler.TickKey("baton", j.Name, at)).Result(); e == 1 {
				n++
			}
		}
		return n
	}
	var first int64
	poll.Require(t, 30*time.Second, "the first chunk claimed", func() bool {
		first = r.s.Stats().Owned
		return first > 0 && g.waiting.Load() >= 16 && claimed() == first
	})
	leading.Store(false)
	h.drainWaitingChunks(t)
	if got := claimed(); got != first || got >= n {
		t.Fatalf("%d leader-only ticks claimed, want the %d of the chunk claimed while leading", got, first)
	}
}

// drainWaitingChunks lets the held dispatches go and waits until every chunk
// that waited for its claim slot has had its turn: a sentinel job's tick,
// due a minute later, is claimed after them (a chunk waits its turn in
// order) and dispatched.
func (h heldRun) drainWaitingChunks(t *testing.T) {
	t.Helper()
	if err := h.r.s.Put(scheduler.Job{Name: "zz-sentinel", Schedule: every(t, "@every 1m"), StartingDeadline: time.Hour}); err != nil {
		t.Fatal(err)
	}
	h.clk.Set(h.at.Add(time.Minute))
	h.release()
	poll.Require(t, 60*time.Second, "the sentinel's tick dispatched", func() bool {
		for id := range h.g.rec.snapshot() {
			if strings.HasPrefix(id, "zz-sentinel@") {
				return true
			}
		}
		return false
	})
}
