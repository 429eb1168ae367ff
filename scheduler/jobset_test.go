package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/clock"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
	"github.com/batonhq/baton/scheduler"
)

// fakeOpts are the options of a replica on a fake clock.
func fakeOpts(clk *clock.Fake, id string) []scheduler.Option {
	return []scheduler.Option{scheduler.WithClock(clk), scheduler.WithReplica(id), scheduler.WithMaxClockSkew(time.Hour),
		scheduler.WithFollowerDelay(100 * time.Millisecond)}
}

// waitTimer waits until the earliest timer of clk fires at at: the
// scheduler's loop has taken a Put or Remove and waits for that tick.
func waitTimer(t *testing.T, clk *clock.Fake, at time.Time) {
	t.Helper()
	poll.Require(t, 10*time.Second, fmt.Sprintf("a timer at %s", at.Format(time.TimeOnly)), func() bool {
		return clk.Waiting(at)
	})
}

// advanceTo moves clk to at in steps of 50ms (retries and followers wait
// on it too).
func advanceTo(clk *clock.Fake, at time.Time) {
	for clk.Now().Before(at) {
		clk.Advance(min(50*time.Millisecond, at.Sub(clk.Now())))
		time.Sleep(2 * time.Millisecond) // real time: lets the loop claim between steps
	}
}

// ticksOf returns the ticks dispatched of job, by instant, with how often.
func ticksOf(rec *recorder, job string) map[time.Time]int {
	out := map[time.Time]int{}
	for _, tk := range rec.dispatched() {
		if tk.Job == job {
			out[tk.At.UTC()]++
		}
	}
	return out
}

// A job put while the scheduler runs, learned 1.5s after it was made,
// claims the ticks due since it was made (within its starting deadline),
// not only those from now on.
func TestPutJobClaimsTicksSinceItWasMade(t *testing.T) {
	srv := redistest.New(t)
	t0 := now().Add(2 * time.Second)
	clk := clock.NewFake(t0)
	rec := newRecorder()
	r := start(t, []*redis.Client{srv.TestClient(t)}, nil, rec, fakeOpts(clk, "r0")...)
	if err := clk.BlockUntil(2); err != nil {
		t.Fatal(err)
	}
	if err := r.s.Put(scheduler.Job{Name: "late", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute,
		Since: t0.Add(-1500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	rec.waitAdvancing(t, clk, 2) // t0-1s and t0
	got := ticksOf(rec, "late")
	for _, at := range []time.Time{t0.Add(-time.Second), t0} {
		if got[at.UTC()] != 1 {
			t.Errorf("tick %s dispatched %d times, want once (all: %v)", at.Format(time.TimeOnly), got[at.UTC()], got)
		}
	}
	if got[t0.Add(-2*time.Second).UTC()] != 0 {
		t.Errorf("a tick before the job was made was dispatched: %v", got)
	}
}

// A job replaced at a tick's instant by a definition that also has the
// tick dispatches it once, and then follows the new definition. One
// replica holds the old definition and another the new one at the instant:
// still once.
func TestReplaceAtATicksInstantDispatchesItOnce(t *testing.T) {
	srv := redistest.New(t)
	t0 := now().Add(2 * time.Second)
	if t0.Unix()%2 == 1 {
		t0 = t0.Add(time.Second) // the new schedule has even seconds
	}
	clk := clock.NewFake(t0.Add(-500 * time.Millisecond))
	rec := newRecorder()
	old := scheduler.Job{Name: "j", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute}
	neu := scheduler.Job{Name: "j", Schedule: every(t, "*/2 * * * * *"), StartingDeadline: time.Minute, Since: t0.Add(-time.Millisecond)}
	a := start(t, []*redis.Client{srv.TestClient(t)}, []scheduler.Job{old}, rec, fakeOpts(clk, "a")...)
	b := start(t, []*redis.Client{srv.TestClient(t)}, []scheduler.Job{old}, rec, fakeOpts(clk, "b")...)
	waitTimer(t, clk, t0)
	if err := a.s.Put(neu); err != nil { // a learns the change before the instant, b after it
		t.Fatal(err)
	}
	advanceTo(clk, t0.Add(300*time.Millisecond))
	rec.waitAdvancing(t, clk, 1)
	if err := b.s.Put(neu); err != nil {
		t.Fatal(err)
	}
	advanceTo(clk, t0.Add(4500*time.Millisecond))
	poll.Require(t, 10*time.Second, "the ticks of the new definition", func() bool {
		return len(ticksOf(rec, "j")) >= 3
	})
	advanceTo(clk, t0.Add(5*time.Second)) // the followers of the last tick find it done
	got := ticksOf(rec, "j")
	for at, n := range got {
		if n != 1 {
			t.Errorf("tick %s dispatched %d times", at.Format(time.TimeOnly), n)
		}
	}
	for _, d := range []time.Duration{0, 2 * time.Second, 4 * time.Second} {
		if got[t0.Add(d).UTC()] != 1 {
			t.Errorf("tick %s of the new definition not dispatched: %v", t0.Add(d).Format(time.TimeOnly), got)
		}
	}
	for _, d := range []time.Duration{3 * time.Second} {
		if got[t0.Add(d).UTC()] != 0 {
			t.Errorf("tick %s of the old definition dispatched after both replicas had the new one: %v", t0.Add(d).Format(time.TimeOnly), got)
		}
	}
}

// A replacement learned after a tick of the old definition came due, but
// made after that tick (its Since is later), still lets the tick be
// claimed once: it was due under the old definition.
func TestReplaceMadeAfterADueTickKeepsThatTick(t *testing.T) {
	srv := redistest.New(t)
	t0 := now().Add(2 * time.Second)
	clk := clock.NewFake(t0.Add(-500 * time.Millisecond))
	rec := newRecorder()
	job := scheduler.Job{Name: "k", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute}
	r := start(t, []*redis.Client{srv.TestClient(t)}, []scheduler.Job{job}, rec, fakeOpts(clk, "r0")...)
	waitTimer(t, clk, t0)
	job.Since = t0.Add(200 * time.Millisecond) // made just after t0, by Redis's clock
	job.Schedule = every(t, "@every 1s")
	if err := r.s.Put(job); err != nil {
		t.Fatal(err)
	}
	advanceTo(clk, t0.Add(1300*time.Millisecond))
	rec.waitAdvancing(t, clk, 2)
	got := ticksOf(rec, "k")
	if got[t0.UTC()] != 1 || got[t0.Add(time.Second).UTC()] != 1 {
		t.Fatalf("want t0 and t0+1s once each, got %v", got)
	}
}

// Remove stops the claims of later ticks.
func TestRemoveStopsLaterTicks(t *testing.T) {
	srv := redistest.New(t)
	t0 := now().Add(2 * time.Second)
	clk := clock.NewFake(t0.Add(-500 * time.Millisecond))
	rec := newRecorder()
	job := scheduler.Job{Name: "gone", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute}
	keep := scheduler.Job{Name: "kept", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute}
	r := start(t, []*redis.Client{srv.TestClient(t)}, []scheduler.Job{job, keep}, rec, fakeOpts(clk, "r0")...)
	waitTimer(t, clk, t0)
	advanceTo(clk, t0.Add(100*time.Millisecond))
	rec.wait(t, 2)
	r.s.Remove("gone")
	if r.s.Jobs() != 1 {
		t.Fatalf("%d jobs after the remove", r.s.Jobs())
	}
	advanceTo(clk, t0.Add(3100*time.Millisecond))
	poll.Require(t, 10*time.Second, "kept's ticks go on", func() bool { return len(ticksOf(rec, "kept")) >= 4 })
	if got := ticksOf(rec, "gone"); len(got) != 1 {
		t.Fatalf("gone: ticks after the remove were dispatched: %v", got)
	}
}

// Put refuses an invalid job and changes nothing.
func TestPutRefusesAnInvalidJob(t *testing.T) {
	srv := redistest.New(t)
	rec := newRecorder()
	r := start(t, []*redis.Client{srv.TestClient(t)}, nil, rec, scheduler.WithReplica("r0"))
	err := r.s.Put(scheduler.Job{Name: "ok", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute},
		scheduler.Job{Name: "bad", Schedule: every(t, "@every 1s")})
	if err == nil || r.s.Jobs() != 0 {
		t.Fatalf("err %v, %d jobs", err, r.s.Jobs())
	}
}

// A replacement made before a tick of the old definition came due drops
// that tick where it waits as a follower's claim (a replica that is not
// its preferred claimer learned the change during its follower delay),
// when the new definition does not have it: it is claimed nowhere, as the
// preferred claimer, which learned the change in time, dropped it too. A
// tick the new definition has, or one due before the change, is kept.
func TestReplaceDropsAWaitingTickTheNewDefinitionLacks(t *testing.T) {
	srv := redistest.New(t)
	locks, err := locking.NewQuorum([]redis.UniversalClient{srv.TestClient(t)}, locking.WithPrefix("baton:lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	t0 := now().Truncate(time.Second).Add(10 * time.Second)
	if t0.Unix()%2 == 0 {
		t0 = t0.Add(time.Second) // an odd second: not a tick of the new schedule
	}
	old := scheduler.Job{Name: "j", Schedule: every(t, "@every 1s"), StartingDeadline: time.Minute}
	for _, c := range []struct {
		at   time.Time
		want bool
	}{
		{t0, false},                      // the old definition's only
		{t0.Add(time.Second), true},      // the new one's too
		{t0.Add(-2 * time.Second), true}, // due before the change
	} {
		s, err := scheduler.New(locks, []scheduler.Job{old}, newRecorder())
		if err != nil {
			t.Fatal(err)
		}
		neu := scheduler.Job{Name: "j", Schedule: every(t, "*/2 * * * * *"), StartingDeadline: time.Minute, Since: t0.Add(-time.Millisecond)}
		kept, err := scheduler.FollowerClaimKeptAfterPut(s, "j", c.at, neu)
		if err != nil {
			t.Fatal(err)
		}
		if kept != c.want {
			t.Errorf("tick %s: kept %v, want %v", c.at.Format(time.TimeOnly), kept, c.want)
		}
	}
}

// Run's queue lets go of the entries of removed and replaced jobs before
// their ticks come due. Each held its job's old definition until then: a
// day for a daily runtime schedule deleted or changed, so a churn of
// schedules grew a replica's heap for as long as the churn went on.
func TestRemovedAndReplacedJobsLeaveTheQueue(t *testing.T) {
	srv := redistest.New(t)
	clk := clock.NewFake(now())
	r := start(t, []*redis.Client{srv.TestClient(t)}, nil, newRecorder(), fakeOpts(clk, "r0")...)
	const n = 1000
	put := func(spec string, from, to int) {
		var js []scheduler.Job
		for i := from; i < to; i++ {
			js = append(js, scheduler.Job{Name: fmt.Sprintf("daily-%04d", i), Schedule: every(t, spec), StartingDeadline: time.Minute, Since: clk.Now()})
		}
		if err := r.s.Put(js...); err != nil {
			t.Fatal(err)
		}
	}
	put("0 0 * * *", 0, n)
	poll.Require(t, 10*time.Second, "every job's next tick queued", func() bool { return scheduler.QueueLen(r.s) == n })
	var gone []string
	for i := range n / 2 {
		gone = append(gone, fmt.Sprintf("daily-%04d", i))
	}
	r.s.Remove(gone...)
	put("30 0 * * *", n/2, n) // the other half replaced
	poll.Require(t, 10*time.Second, "only the replaced jobs' new entries queued", func() bool { return scheduler.QueueLen(r.s) == n/2 })
}

// A job forgotten (a deleted runtime schedule) and put again, its dispatch
// fence counters gone, gets fences seeded anew on the masters that grant
// its claims. The masters' clocks may differ by seconds: the next
// dispatch's fence must still be above the last one, drawn from a clock
// ahead, when a majority without that master grants it.
func TestAJobPutAgainAfterForgetMarksGetsAHigherFence(t *testing.T) {
	clk := redistest.NewTestClock(t)
	const ahead = 3 * time.Second // within the 24 h the docs allow
	if err := clk.Step(ahead); err != nil {
		t.Fatal(err)
	}
	servers := []*redistest.Server{redistest.New(t, redistest.WithClock(clk)), redistest.New(t), redistest.New(t)}
	ctx := context.Background()
	var rdbs, direct []*redis.Client
	var ps []*redistest.Proxy
	for _, s := range servers {
		p := redistest.NewTestProxy(t, s.Addr())
		ps = append(ps, p)
		rdbs = append(rdbs, s.TestClient(t, func(o *redis.Options) { o.Addr = p.Addr() }))
		direct = append(direct, s.TestClient(t))
	}
	ms := make([]redis.UniversalClient, len(rdbs))
	for i, r := range rdbs {
		ms[i] = r
	}
	const quarantine = 500 * time.Millisecond
	locks, err := locking.NewQuorum(ms, locking.WithPrefix("baton:lock:"), locking.WithFreshDeployment(),
		locking.WithRestartQuarantine(quarantine))
	if err != nil {
		t.Fatal(err)
	}
	// a deployment that has run a while: its masters' fence floors, from
	// their marking, lie behind the clocks
	if err := locks.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	marked := direct[0].Time(ctx).Val()
	poll.Require(t, 10*time.Second, "every master's clock passed the fence floor", func() bool {
		return direct[1].Time(ctx).Val().After(marked) && direct[2].Time(ctx).Val().After(marked)
	})

	fake := clock.NewFake(now())
	rec := newRecorder()
	job := scheduler.Job{Name: "f", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	r := startWith(t, locks, nil, rec, fakeOpts(fake, "r0")...)
	next := func() scheduler.Tick {
		t.Helper()
		at := fake.Now().Truncate(time.Minute).Add(time.Minute)
		waitTimer(t, fake, at)
		fake.Set(at)
		rec.waitAdvancing(t, fake, 1)
		got := rec.dispatched()
		return got[len(got)-1]
	}
	// granted by the master ahead and another (the third answers late):
	// the fence is the clock ahead's, raised on a majority
	if err := ps[2].AddLatency(100*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	job.Since = fake.Now()
	if err := r.s.Put(job); err != nil {
		t.Fatal(err)
	}
	last := next()
	if err := ps[2].Restore(); err != nil {
		t.Fatal(err)
	}

	// deleted: removed and forgotten; its counters are gone
	r.s.Remove("f")
	const key = "baton:{f}:fence"
	poll.Require(t, 10*time.Second, "the claim landed on every master", func() bool {
		for _, d := range direct {
			if d.Exists(ctx, key).Val() == 0 {
				return false
			}
		}
		return true
	})
	if err := r.s.ForgetMarks(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 10*time.Second, "the forgotten fence counters ended on every master", func() bool {
		for _, d := range direct {
			if d.Exists(ctx, key).Val() != 0 {
				return false
			}
		}
		return true
	})

	// put again; its next tick is granted by a majority without the master ahead
	if err := ps[0].Cut(); err != nil {
		t.Fatal(err)
	}
	job.Since = fake.Now()
	if err := r.s.Put(job); err != nil {
		t.Fatal(err)
	}
	tk := next()
	if tk.Fence <= last.Fence {
		t.Fatalf("tick %s dispatched with fence %d, not above the last dispatch's %d (%v back; the masters' clocks differ by %v, their quarantine is %v)",
			tk.At.Format(time.TimeOnly), tk.Fence, last.Fence, time.Duration(last.Fence-tk.Fence)*time.Microsecond, ahead, quarantine)
	}
}

// A claim's fence raise (lua/raise.lua) that reaches a master after
// ForgetMarks deleted the job's dispatch fence there writes the counter
// back below the master's forgotten floor, and a counter that is there is
// never compared with the floor. ForgetMarks runs as each replica follows
// a delete, while another replica's claim may be under way (see its doc):
// a job put again then gets a dispatch fence already issued. Masters X, Y
// (its clock ahead) and Z; replica r1's answers from X come late.
func TestAJobPutAgainAfterALateFenceRaiseGetsAHigherFence(t *testing.T) {
	clk := redistest.NewTestClock(t)
	servers := []*redistest.Server{redistest.New(t), redistest.New(t, redistest.WithClock(clk)), redistest.New(t)}
	const x, y, z = 0, 1, 2
	ctx := context.Background()
	direct := make([]*redis.Client, len(servers))
	for i, s := range servers {
		direct[i] = s.TestClient(t)
	}
	lockClient := func(idle int) (*locking.Client, []*redistest.Proxy) {
		var ms []redis.UniversalClient
		var ps []*redistest.Proxy
		for _, s := range servers {
			p := redistest.NewTestProxy(t, s.Addr())
			ps = append(ps, p)
			ms = append(ms, s.TestClient(t, func(o *redis.Options) {
				// X's late answers break no connection, and r1's calls find
				// connections dialed (and checked) before X was slow
				o.Addr, o.ReadTimeout, o.WriteTimeout = p.Addr(), 20*time.Second, 20*time.Second
				o.MinIdleConns = idle
			}))
		}
		locks, err := locking.NewQuorum(ms, locking.WithPrefix("baton:lock:"), locking.WithFreshDeployment(),
			locking.WithRestartQuarantine(500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := locks.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
		return locks, ps
	}
	locks1, p1 := lockClient(4)
	locks2, p2 := lockClient(0)
	// marked with the clocks together; then Y's clock goes ahead
	if err := clk.Step(20 * time.Second); err != nil {
		t.Fatal(err)
	}

	job := scheduler.Job{Name: "f", Schedule: every(t, "@every 1m"), StartingDeadline: time.Minute}
	long := scheduler.WithMasterTimeout(20 * time.Second)
	base := now()
	t1 := base.Truncate(time.Minute).Add(time.Minute)
	t2, t3 := t1.Add(time.Minute), t1.Add(2*time.Minute)
	// r2 takes the ticks after t1
	f1, f2 := clock.NewFake(base), clock.NewFake(t1.Add(time.Second))
	rec1, rec2 := newRecorder(), newRecorder()
	r1 := startWith(t, locks1, nil, rec1, append(fakeOpts(f1, "r1"), long)...)
	r2 := startWith(t, locks2, nil, rec2, append(fakeOpts(f2, "r2"), long)...)
	job.Since = f1.Now()
	if err := r1.s.Put(job); err != nil {
		t.Fatal(err)
	}
	job.Since = f2.Now()
	if err := r2.s.Put(job); err != nil {
		t.Fatal(err)
	}

	// r1 claims t1: its claim lands on X at once, X's answer comes late,
	// and r1 raises the fence (Y's clock) on X only once it has it
	waitTick(t, f1, t1)
	if err := locks1.Prepare(ctx); err != nil { // checks the connections dialed since
		t.Fatal(err)
	}
	const late = 5 * time.Second
	if err := p1[x].AddLatency(late, false); err != nil {
		t.Fatal(err)
	}
	f1.Set(t1)
	const key = "baton:{f}:fence"
	poll.Require(t, 10*time.Second, "r1's claim of t1 landed on every master", func() bool {
		if f1.Now().Before(t1.Add(time.Second)) {
			f1.Advance(25 * time.Millisecond) // a follower's delay, retries
		}
		for _, d := range direct {
			if d.Exists(ctx, key).Val() == 0 {
				return false
			}
		}
		return true
	})
	landed := time.Now()

	// meanwhile r2 claims t2 on X and Y (Z cut off): a fence above t1's
	if err := p2[z].Cut(); err != nil {
		t.Fatal(err)
	}
	waitTick(t, f2, t2)
	f2.Set(t2)
	rec2.waitAdvancing(t, f2, 1)
	last := rec2.dispatched()[0]
	if err := p2[z].Restore(); err != nil {
		t.Fatal(err)
	}
	// the schedule is deleted: both replicas remove it, r2 forgets it
	r1.s.Remove("f")
	r2.s.Remove("f")
	if err := r2.s.ForgetMarks(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(landed); d > late*4/5 {
		t.Fatalf("r2's claim and forget took %v, too close to X's lateness (%v) to be sure they came before r1's raise", d, late)
	}
	// r1's raise lands on X after the forget
	rec1.wait(t, 1)
	if err := p1[x].Restore(); err != nil {
		t.Fatal(err)
	}
	first := rec1.dispatched()[0]
	if first.Fence >= last.Fence {
		t.Fatalf("t1's fence %d not below t2's %d", first.Fence, last.Fence)
	}
	t.Logf("X's dispatch fence counter after the forget: %s (forgotten floor %s)", direct[x].Get(ctx, key).Val(), direct[x].Get(ctx, "baton:lock:marker:forgotten").Val())

	// put again; its next tick is granted by a majority without Y
	if err := p2[y].Cut(); err != nil {
		t.Fatal(err)
	}
	job.Since = f2.Now()
	if err := r2.s.Put(job); err != nil {
		t.Fatal(err)
	}
	waitTick(t, f2, t3)
	f2.Set(t3)
	rec2.waitAdvancing(t, f2, 1)
	got := rec2.dispatched()
	tk := got[len(got)-1]
	if tk.Fence <= last.Fence {
		t.Fatalf("tick %s dispatched with fence %d, not above t2's %d: t1's fence raise, landing on X after the forget, set X's counter below its forgotten floor",
			tk.At.Format(time.TimeOnly), tk.Fence, last.Fence)
	}
}

// waitTick waits until clk has a timer for the tick at at, as the job's
// first claimer or as a follower (the replicas' order changes as their
// heartbeats come and go).
func waitTick(t *testing.T, clk *clock.Fake, at time.Time) {
	t.Helper()
	poll.Require(t, 10*time.Second, fmt.Sprintf("a timer for the tick at %s", at.Format(time.TimeOnly)), func() bool {
		return clk.Waiting(at) || clk.Waiting(at.Add(100*time.Millisecond))
	})
}
