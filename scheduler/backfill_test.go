package scheduler_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// backfiller is a scheduler made for Backfill (never Run) over masters.
func backfiller(t *testing.T, rdbs []*redis.Client, job scheduler.Job, d scheduler.Dispatcher) *scheduler.Scheduler {
	t.Helper()
	ms := make([]redis.UniversalClient, len(rdbs))
	for i, r := range rdbs {
		ms[i] = r
	}
	locks, err := locking.NewQuorum(ms, locking.WithPrefix("baton:lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locks.Close() })
	s, err := scheduler.New(locks, []scheduler.Job{job}, d, scheduler.WithTickLeaseTTL(time.Second), scheduler.WithMaxClockSkew(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Backfill dispatches the ticks recorded missed or paused and those with no
// record, whatever their age; a tick recorded done is left alone, and one
// leased by a claim that never finishes is dispatched once its lease ends.
func TestBackfillDispatchesOnlyTicksThatNeverRan(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	job := scheduler.Job{Name: "b", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	base := now().Truncate(time.Minute).Add(-10 * time.Minute)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
	key := func(i int) string { return "baton:{b}:tick:" + strconv.FormatInt(at(i).UnixMilli(), 10) }
	rdb.Set(ctx, key(0), "missed", time.Hour)
	rdb.Set(ctx, key(1), "paused", time.Hour)
	rdb.Set(ctx, key(2), "done", time.Hour)
	rdb.Set(ctx, key(4), "token-of-a-claim-that-died", 1500*time.Millisecond)
	rec := newRecorder()
	s := backfiller(t, []*redis.Client{rdb}, job, rec)
	bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.Backfill(bctx, "b", []time.Time{at(0), at(1), at(2), at(3), at(4)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]bool{at(0).UnixMilli(): true, at(1).UnixMilli(): true, at(3).UnixMilli(): true, at(4).UnixMilli(): true}
	if len(res.Dispatched) != 4 || len(res.Decided) != 1 || !res.Decided[0].Equal(at(2)) || len(res.Failed) != 0 {
		t.Fatalf("backfill: %+v", res)
	}
	for _, d := range res.Dispatched {
		if !want[d.UnixMilli()] {
			t.Errorf("dispatched %v", d)
		}
	}
	for id, ts := range rec.snapshot() {
		if len(ts) != 1 {
			t.Errorf("%s dispatched %d times", id, len(ts))
		}
	}
	for i := range 5 {
		if v := rdb.Get(ctx, key(i)).Val(); v != "done" {
			t.Errorf("tick %d recorded %q after the backfill, want done", i, v)
		}
	}
	// again: nothing left to do
	res, err = s.Backfill(bctx, "b", []time.Time{at(0), at(1), at(2), at(3), at(4)})
	if err != nil || len(res.Dispatched) != 0 || len(res.Decided) != 5 {
		t.Errorf("second backfill: %+v %v", res, err)
	}
}

// Backfills racing each other over the same window, on a quorum of three
// masters: every tick is dispatched exactly once.
func TestRacingBackfillsDispatchEachTickOnce(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t))
	}
	job := scheduler.Job{Name: "r", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	base := now().Truncate(time.Minute).Add(-60 * time.Minute)
	var ticks []time.Time
	for i := range 40 {
		ticks = append(ticks, base.Add(time.Duration(i)*time.Minute))
	}
	rec := newRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]scheduler.BackfillResult, 3)
	for i := range 3 {
		s := backfiller(t, rdbs, job, rec)
		wg.Go(func() {
			var err error
			results[i], err = s.Backfill(ctx, "r", ticks)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	dispatched := 0
	for _, r := range results {
		dispatched += len(r.Dispatched)
		if len(r.Failed) > 0 {
			t.Errorf("failed: %v (%s)", r.Failed, r.Reason)
		}
	}
	snap := rec.snapshot()
	if dispatched != len(ticks) || len(snap) != len(ticks) {
		t.Errorf("%d dispatched by the backfills, %d distinct ticks dispatched; want %d each", dispatched, len(snap), len(ticks))
	}
	for id, ts := range snap {
		if len(ts) != 1 {
			t.Errorf("%s dispatched %d times", id, len(ts))
		}
	}
}

// Schedule: a backfill meets a tick leased by a claimer that died (its
// lease has 2s left). The live path waits for the lease's remaining ttl;
// Backfill's retry wait is clamped to "the tick's starting deadline + 1s",
// which for a past tick is already over, so it re-claims every ~10ms
// (retryAt's rounding) until the lease expires: a hot loop of claim
// scripts on every lock master, per busy tick.
func TestBackfillSpinsOnABusyTick(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	job := scheduler.Job{Name: "spin", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	at := now().Truncate(time.Minute).Add(-10 * time.Minute)
	key := "baton:{spin}:tick:" + strconv.FormatInt(at.UnixMilli(), 10)
	rdb.Set(ctx, key, "token-of-a-claim-that-died", 2*time.Second)
	rec := newRecorder()
	s := backfiller(t, []*redis.Client{rdb}, job, rec)
	before := redistest.CommandCalls(t, rdb)
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := s.Backfill(bctx, "spin", []time.Time{at})
	if err != nil || len(res.Dispatched) != 1 {
		t.Fatalf("backfill: %+v %v", res, err)
	}
	after := redistest.CommandCalls(t, rdb)
	scripts := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]
	gets := after["get"] - before["get"]
	t.Logf("while waiting 2s for one busy tick: %d script calls, %d GETs", scripts, gets)
	if scripts > 30 {
		t.Errorf("backfill of one tick behind a 2s lease ran %d claim scripts and %d GETs (busy loop; the live path waits for the lease's ttl)", scripts, gets)
	}
}

// G1, schedule: two live replicas run an @every 1s job on a quorum of three
// masters while three backfills repeatedly backfill the last 4 seconds
// (ticks still within their starting deadline, some not claimed yet by
// the schedule). Every tick is dispatched at most once.
func TestBackfillRacesTheLiveSchedule(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t))
	}
	job := scheduler.Job{Name: "live", Schedule: every(t, "@every 1s"), StartingDeadline: 3 * time.Second}
	rec := newRecorder()
	for i := range 2 {
		start(t, rdbs, []scheduler.Job{job}, rec, scheduler.WithTickLeaseTTL(time.Second),
			scheduler.WithReplica("live-"+strconv.Itoa(i)), scheduler.WithFollowerDelay(300*time.Millisecond))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	until := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for i := range 3 {
		s := backfiller(t, rdbs, job, rec)
		wg.Go(func() {
			for time.Now().Before(until) {
				n := time.Now().Truncate(time.Second)
				var ticks []time.Time
				for k := range 4 {
					ticks = append(ticks, n.Add(-time.Duration(k)*time.Second))
				}
				if _, err := s.Backfill(ctx, "live", ticks); err != nil {
					t.Errorf("backfill %d: %v", i, err)
					return
				}
				time.Sleep(time.Duration(50+i*70) * time.Millisecond) // real time: backfills race live claims of ticks falling due by Redis TIME
			}
		})
	}
	wg.Wait()
	time.Sleep(2 * time.Second) // real time: the last ticks fall due by Redis TIME and their live claims (follower 300ms behind) go out
	snap := rec.snapshot()
	if len(snap) < 4 {
		t.Fatalf("only %d ticks dispatched", len(snap))
	}
	for id, ts := range snap {
		if len(ts) != 1 {
			var by []string
			for _, tk := range ts {
				by = append(by, tk.Replica)
			}
			t.Errorf("%s dispatched %d times, by %v", id, len(ts), by)
		}
	}
}

// loseReplies executes commands but reports a lost reply for a share of
// them (the server did the work, the client never hears).
type loseReplies struct {
	share float64
	on    *atomic.Bool // losing only once switched on (after the masters' restart checks)
	lost  *atomic.Int64
}

var errLostReply = errors.New("lost reply")

func (h loseReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h loseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.on.Load() && rand.Float64() < h.share {
			h.lost.Add(1)
			cmd.SetErr(errLostReply)
			return errLostReply
		}
		return err
	}
}
func (h loseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if h.on.Load() && rand.Float64() < h.share {
			h.lost.Add(1)
			for _, c := range cmds {
				c.SetErr(errLostReply)
			}
			return errLostReply
		}
		return err
	}
}

// G1, schedule: two backfills of the same 80 old ticks (one in order, one reversed) race on a quorum of
// three masters; each loses 30% of its replies from two of the masters (0 and 1;
// 1 and 2) (claims, commits and releases that happened server-side). Every tick
// is dispatched exactly once.
func TestRacingBackfillsWithLostReplies(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var clean, lossy []*redis.Client
	on, lost := &atomic.Bool{}, &atomic.Int64{}
	for i, s := range servers {
		c := s.TestClient(t)
		if i > 0 {
			c.AddHook(loseReplies{share: 0.3, on: on, lost: lost})
		}
		clean = append(clean, c)
		c = s.TestClient(t)
		if i < 2 {
			c.AddHook(loseReplies{share: 0.3, on: on, lost: lost})
		}
		lossy = append(lossy, c)
	}
	job := scheduler.Job{Name: "lr", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	base := now().Truncate(time.Minute).Add(-90 * time.Minute)
	var ticks []time.Time
	for i := range 80 {
		ticks = append(ticks, base.Add(time.Duration(i)*time.Minute))
	}
	rec := newRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	res := make([]scheduler.BackfillResult, 2)
	warm := base.Add(-10 * time.Hour)
	var bfs []*scheduler.Scheduler
	for _, rdbs := range [][]*redis.Client{lossy, clean} {
		s := backfiller(t, rdbs, job, rec)
		if _, err := s.Backfill(ctx, "lr", []time.Time{warm}); err != nil { // the restart checks, without losses
			t.Fatal(err)
		}
		bfs = append(bfs, s)
	}
	on.Store(true)
	for i, s := range bfs {
		wg.Go(func() {
			var err error
			mine := slices.Clone(ticks)
			if i == 1 {
				slices.Reverse(mine) // meet in the middle
			}
			res[i], err = s.Backfill(ctx, "lr", mine)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d replies lost", lost.Load())
	t.Logf("lossy: %d dispatched, %d decided, %d failed (%s); clean: %d dispatched, %d decided, %d failed",
		len(res[0].Dispatched), len(res[0].Decided), len(res[0].Failed), res[0].Reason, len(res[1].Dispatched), len(res[1].Decided), len(res[1].Failed))
	for id, ts := range rec.snapshot() {
		if len(ts) != 1 {
			t.Errorf("%s dispatched %d times", id, len(ts))
		}
	}
	if n := len(rec.snapshot()) - 1; n != len(ticks) { // less the warm-up tick
		t.Errorf("%d of %d ticks dispatched", n, len(ticks))
	}
}

// G1, schedule: 20 old ticks were dispatched and recorded done on masters
// 0 and 1 only (master 2 missed the commit); master 0 then restarts empty;
// a backfill of the window runs (with a lock client that skips the
// restart quarantine, the weakest setting). Master 1 still says done, and
// any master answering done means done: nothing is dispatched.
func TestBackfillAfterAMasterRestartedEmpty(t *testing.T) {
	servers := redistest.NewN(t, 3)
	var rdbs []*redis.Client
	for _, s := range servers {
		rdbs = append(rdbs, s.TestClient(t))
	}
	ctx := context.Background()
	job := scheduler.Job{Name: "rs", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	base := now().Truncate(time.Minute).Add(-40 * time.Minute)
	var ticks []time.Time
	for i := range 20 {
		at := base.Add(time.Duration(i) * time.Minute)
		ticks = append(ticks, at)
		for _, r := range rdbs[:2] {
			r.Set(ctx, "baton:{rs}:tick:"+strconv.FormatInt(at.UnixMilli(), 10), "done", time.Hour)
		}
	}
	if err := servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	s := backfiller(t, rdbs, job, rec)
	bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	res, err := s.Backfill(bctx, "rs", ticks)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dispatched) != 0 || len(rec.snapshot()) != 0 {
		t.Errorf("ticks recorded done on a surviving master were dispatched again: %v", res.Dispatched)
	}
	t.Logf("decided %d, failed %d (%s)", len(res.Decided), len(res.Failed), res.Reason)
}
