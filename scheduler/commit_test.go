package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/locking"
)

// The schedules of a commit whose answer does not tell the owner what
// happened: a reply that arrives after the master timeout, links to some
// masters cut while the commit is on its way. Each drives process() on real
// redis-servers reached through proxies, and checks that the tick ran once,
// or is recorded as not run with why, and is never "done" without a run.

// cmDisp counts every dispatch by tick and keeps the not-run records.
type cmDisp struct {
	mu     sync.Mutex
	runs   []Tick
	notRun []string // reasons
	before func(Tick)
	err    error // what Dispatch answers
}

func (d *cmDisp) Dispatch(_ context.Context, t Tick) error {
	if d.before != nil {
		d.before(t)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil {
		return d.err
	}
	d.runs = append(d.runs, t)
	return nil
}

func (d *cmDisp) NotDispatched(_ context.Context, _ Tick, _ bool, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notRun = append(d.notRun, reason)
}

func (d *cmDisp) counts() (runs int, notRun []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runs), append([]string(nil), d.notRun...)
}

// cmMasters is n redis-servers, a proxy in front of each, and a client of
// each that bypasses the proxies (for the test's own reads).
type cmMasters struct {
	servers []*redistest.Server
	proxies []*redistest.Proxy
	direct  []*redis.Client
}

func newCMMasters(t *testing.T, n int) *cmMasters {
	t.Helper()
	m := &cmMasters{servers: redistest.NewN(t, n)}
	for _, s := range m.servers {
		m.proxies = append(m.proxies, redistest.NewTestProxy(t, s.Addr()))
		m.direct = append(m.direct, s.TestClient(t))
	}
	// the scripts are loaded, as on masters that served a tick before: a
	// late or lost reply is then the script's own, not a NOSCRIPT's
	for _, r := range m.direct {
		for _, sc := range []*quorum.Script{commitOwnedScript, commitScript, releaseScript, extendScript} {
			if err := sc.Load(context.Background(), r).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	return m
}

// replica builds a scheduler over the masters, through the proxies or not,
// running one job "c" (@every 1s).
func (m *cmMasters) replica(t *testing.T, viaProxies, commitFirst bool, deadline time.Duration, d Dispatcher, opts ...Option) *Scheduler {
	t.Helper()
	ms := make([]redis.UniversalClient, len(m.servers))
	for i, s := range m.servers {
		if viaProxies {
			ms[i] = s.TestClient(t, func(o *redis.Options) { o.Addr = m.proxies[i].Addr() })
		} else {
			ms[i] = s.TestClient(t)
		}
	}
	locks, sched := preparedLocks(t, ms), everySecond(t)
	jobs := []Job{{Name: "c", Schedule: sched, StartingDeadline: deadline, CommitFirst: commitFirst}}
	s, err := New(locks, jobs, d, append([]Option{WithLogger(slog.New(slog.NewTextHandler(tlogw{t}, nil)))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// preparedLocks is a quorum lock client over ms (prefix baton:lock:, fresh
// masters), prepared and closed at cleanup.
func preparedLocks(t *testing.T, ms []redis.UniversalClient) *locking.Client {
	t.Helper()
	locks, err := locking.NewQuorum(ms, locking.WithPrefix("baton:lock:"), locking.WithFreshDeployment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locks.Close() })
	if err := locks.Prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	return locks
}

// everySecond is the schedule @every 1s.
func everySecond(t *testing.T) Schedule {
	t.Helper()
	sched, err := ParseSchedule("@every 1s", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return sched
}

// records reads the tick's record on every master, directly.
func (m *cmMasters) records(t *testing.T, s *Scheduler, at time.Time) []string {
	t.Helper()
	var out []string
	for _, r := range m.direct {
		out = append(out, getKey(t, r, s.keysOf(s.jobs["c"]).tickKey(at)))
	}
	return out
}

// faultOnce runs fault at the first "committed" note of the scheduler
// (just before the commit goes out) and heal after the given time, in the
// background; healed is closed once heal ran.
type faultOnce struct {
	once   sync.Once
	healed chan struct{}
}

func (f *faultOnce) observer(t *testing.T, fault, heal func() error, after time.Duration) Option {
	f.healed = make(chan struct{})
	return WithObserver(func(kind, _ string, _ time.Time, _ string) {
		if kind != "committed" {
			return
		}
		f.once.Do(func() {
			if err := fault(); err != nil {
				t.Error(err)
			}
			go func() {
				defer close(f.healed)
				time.Sleep(after) // real time: the masters' clocks decide leases
				if err := heal(); err != nil {
					t.Error(err)
				}
			}()
		})
	})
}

func (f *faultOnce) wait(t *testing.T) {
	t.Helper()
	select {
	case <-f.healed:
	case <-time.After(30 * time.Second):
		t.Fatal("the fault was never healed")
	}
}

// settle runs process on the retries the scheduler left until none is left
// (at most rounds), as its loop would.
func settleRetries(s *Scheduler, rounds int) {
	for range rounds {
		r := drainRetries(s)
		if len(r) == 0 {
			return
		}
		var b []item
		for _, it := range r {
			b = append(b, it)
		}
		s.runBatch(context.Background(), b)
	}
}

func onProxies(m *cmMasters, idx []int, f func(p *redistest.Proxy) error) func() error {
	return func() error {
		for _, i := range idx {
			if err := f(m.proxies[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

// Schedule: R owns tick T of a job that commits first (local mode); its
// token-checked commit records T done, but the reply arrives after the
// master timeout (on the one master, or on two of three). R must not count
// that commit as failed and then find its own record "done" on the retry:
// T runs, once.
func TestLateCommitReplyStillRuns(t *testing.T) {
	for _, tc := range []struct {
		name    string
		masters int
		late    []int
	}{
		{"one master", 1, []int{0}},
		{"three masters, two late", 3, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newCMMasters(t, tc.masters)
			d := &cmDisp{}
			var f faultOnce
			late := onProxies(m, tc.late, func(p *redistest.Proxy) error { return p.AddLatency(600*time.Millisecond, false) })
			s := m.replica(t, true, true, time.Minute, d, WithReplica("R"), WithMasterTimeout(250*time.Millisecond), WithTickLeaseTTL(4*time.Second),
				f.observer(t, late, onProxies(m, tc.late, (*redistest.Proxy).Restore), time.Second))
			at := dueTick()
			s.runBatch(context.Background(), batchOf(s, at, "c"))
			f.wait(t)
			settleRetries(s, 5)
			if runs, notRun := d.counts(); runs != 1 {
				t.Fatalf("tick ran %d times (not-run records %q), want once", runs, notRun)
			}
			done := 0
			for _, v := range m.records(t, s, at) {
				if v == "done" {
					done++
				}
			}
			if done < tc.masters/2+1 {
				t.Errorf("records %q: want done on a quorum", m.records(t, s, at))
			}
		})
	}
}

// Schedule: as above on one master, but the reply stays late beyond the
// tick lease, so the owner gives up its commit and releases (which leaves
// the record: token-checked). Its retry holds the same claim, finds the
// record its own commit wrote, and runs the tick.
func TestRetryHoldingItsClaimRunsItsOwnCommit(t *testing.T) {
	m := newCMMasters(t, 1)
	d := &cmDisp{}
	var f faultOnce
	late := onProxies(m, []int{0}, func(p *redistest.Proxy) error { return p.AddLatency(time.Second, false) })
	s := m.replica(t, true, true, time.Minute, d, WithReplica("R"), WithMasterTimeout(200*time.Millisecond), WithTickLeaseTTL(time.Second),
		f.observer(t, late, onProxies(m, []int{0}, (*redistest.Proxy).Restore), 1500*time.Millisecond))
	at := dueTick()
	s.runBatch(context.Background(), batchOf(s, at, "c"))
	f.wait(t)
	if runs, _ := d.counts(); runs != 0 {
		t.Fatalf("tick ran %d times while its commit was unanswered", runs)
	}
	settleRetries(s, 5)
	if runs, notRun := d.counts(); runs != 1 {
		t.Fatalf("tick ran %d times (not-run records %q), want once", runs, notRun)
	}
}

// Schedule: three masters; R's links to B and C are cut while its commit
// goes out, so only A records the tick. Back within the lease, the commit
// is completed on them and the tick runs; back only after the tick's
// starting deadline, the tick is recorded as not run with why, and no
// master keeps a "done" for it.
func TestCommitOnMinorityCompletedOrRecordedMissed(t *testing.T) {
	t.Run("links back within the lease", func(t *testing.T) {
		m := newCMMasters(t, 3)
		d := &cmDisp{}
		var f faultOnce
		bc := []int{1, 2}
		s := m.replica(t, true, true, time.Minute, d, WithReplica("R"), WithTickLeaseTTL(5*time.Second),
			f.observer(t, onProxies(m, bc, (*redistest.Proxy).Cut), onProxies(m, bc, (*redistest.Proxy).Restore), 500*time.Millisecond))
		at := dueTick()
		s.runBatch(context.Background(), batchOf(s, at, "c"))
		f.wait(t)
		settleRetries(s, 5)
		if runs, notRun := d.counts(); runs != 1 {
			t.Fatalf("tick ran %d times (not-run records %q), want once", runs, notRun)
		}
		if recs := m.records(t, s, at); recs[1] != "done" && recs[2] != "done" {
			t.Errorf("records %q: the commit was not completed to a quorum", recs)
		}
	})
	t.Run("links back after the starting deadline", func(t *testing.T) {
		m := newCMMasters(t, 3)
		d := &cmDisp{}
		var f faultOnce
		bc := []int{1, 2}
		// due this second, not the last: on a loaded host the first claim
		// must still find the tick inside its 3s deadline, or nothing is
		// committed and the fault never comes
		at := time.Now().Truncate(time.Second).UTC()
		const deadline = 3 * time.Second
		cutFor := time.Until(at.Add(deadline + 700*time.Millisecond))
		s := m.replica(t, true, true, deadline, d, WithReplica("R"), WithTickLeaseTTL(time.Second), WithMasterTimeout(300*time.Millisecond),
			f.observer(t, onProxies(m, bc, (*redistest.Proxy).Cut), onProxies(m, bc, (*redistest.Proxy).Restore), cutFor))
		s.runBatch(context.Background(), batchOf(s, at, "c"))
		f.wait(t)
		settleRetries(s, 5)
		runs, notRun := d.counts()
		if runs != 0 {
			t.Fatalf("tick ran %d times after its starting deadline", runs)
		}
		if len(notRun) != 1 || !strings.Contains(notRun[0], "only some lock masters") {
			t.Fatalf("not-run records %q, want one saying why", notRun)
		}
		for i, v := range m.records(t, s, at) {
			if v == "done" {
				t.Errorf("master %d records the tick done, but it never ran (records %q)", i, m.records(t, s, at))
			}
		}
	})
}

// Held but close: R dispatches tick T of a queued job (committed after the
// dispatch); its commit reaches only A (links to B and C cut for 500 ms);
// then A restarts empty. The commit must have been completed on B and C
// while R's lease held, so a second replica finds T done and does not
// dispatch it again (no reliance on the queue's task ID).
func TestMinorityCommitThenRestartRunsOnce(t *testing.T) {
	m := newCMMasters(t, 3)
	d := &cmDisp{}
	bc := []int{1, 2}
	var once sync.Once
	healed := make(chan struct{})
	d.before = func(Tick) {
		once.Do(func() {
			if err := onProxies(m, bc, (*redistest.Proxy).Cut)(); err != nil {
				t.Error(err)
			}
			go func() {
				defer close(healed)
				time.Sleep(500 * time.Millisecond) // real time: the cut outlasts the 300ms master timeout, inside R's 1.5s lease on the masters' clocks
				if err := onProxies(m, bc, (*redistest.Proxy).Restore)(); err != nil {
					t.Error(err)
				}
			}()
		})
	}
	const lease = 1500 * time.Millisecond
	r := m.replica(t, true, false, time.Minute, d, WithReplica("R"), WithTickLeaseTTL(lease), WithMasterTimeout(300*time.Millisecond))
	at := dueTick()
	claimed := time.Now()
	r.runBatch(context.Background(), batchOf(r, at, "c"))
	<-healed
	settleRetries(r, 5)
	if err := m.servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(claimed.Add(lease + 200*time.Millisecond))) // real time: R's lease expires by the masters' clocks
	r2 := m.replica(t, false, false, time.Minute, d, WithReplica("R2"))
	r2.runBatch(context.Background(), batchOf(r2, at, "c"))
	settleRetries(r2, 5)
	if runs, _ := d.counts(); runs != 1 {
		t.Fatalf("tick dispatched %d times (records %q), want once", runs, m.records(t, r, at))
	}
}

// tlogw writes a scheduler's log into the test's.
type tlogw struct{ t *testing.T }

func (w tlogw) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// Schedule: three masters; R's links to B and C are cut while its commit
// goes out, so only A records the tick done, and R dies there (its retries
// never run). R never ran the tick: it runs only once a quorum has its
// commit. Another replica, as a follower and as a fresh claim, must not
// read A's record as "dispatched": once R's lease is gone, it claims B and
// C and runs the tick. R, back, finds it done and does not run it again.
func TestOwnerDeadAfterMinorityCommitTickRunsElsewhere(t *testing.T) {
	for _, follower := range []bool{true, false} {
		name := "fresh claim"
		if follower {
			name = "follower"
		}
		t.Run(name, func(t *testing.T) {
			m := newCMMasters(t, 3)
			d := &cmDisp{}
			bc := []int{1, 2}
			var once sync.Once
			cut := WithObserver(func(kind, _ string, _ time.Time, _ string) {
				if kind == "committed" {
					once.Do(func() {
						if err := onProxies(m, bc, (*redistest.Proxy).Cut)(); err != nil {
							t.Error(err)
						}
					})
				}
			})
			const lease = time.Second
			r := m.replica(t, true, true, time.Minute, d, WithReplica("R"), WithTickLeaseTTL(lease), WithMasterTimeout(200*time.Millisecond), cut)
			at := dueTick()
			claimed := time.Now()
			r.runBatch(context.Background(), batchOf(r, at, "c"))
			if runs, _ := d.counts(); runs != 0 {
				t.Fatalf("R ran the tick %d times with its commit on a minority", runs)
			}
			if recs := m.records(t, r, at); recs[0] != "done" {
				t.Fatalf("records %q: want A's done (the schedule needs it)", recs)
			}
			// R is dead: its retries are dropped
			drainRetries(r)
			// real time: R's leases expire by the masters' clocks
			time.Sleep(time.Until(claimed.Add(lease + 200*time.Millisecond))) // real time: R's lease expires by the masters' clocks
			r2 := m.replica(t, false, true, time.Minute, d, WithReplica("R2"))
			b := batchOf(r2, at, "c")
			if follower {
				b[0].kind = kindFollower
			}
			r2.runBatch(context.Background(), b)
			settleRetries(r2, 5)
			if runs, notRun := d.counts(); runs != 1 {
				t.Fatalf("tick ran %d times (not-run records %q, records %q), want once", runs, notRun, m.records(t, r, at))
			}
			// R comes back and retries its claim
			if err := onProxies(m, bc, (*redistest.Proxy).Restore)(); err != nil {
				t.Fatal(err)
			}
			r.runBatch(context.Background(), batchOf(r, at, "c"))
			settleRetries(r, 5)
			if runs, notRun := d.counts(); runs != 1 {
				t.Fatalf("tick ran %d times after R came back (not-run records %q), want once", runs, notRun)
			}
		})
	}
}

// A tick of a job that commits first is recorded done before its run; when
// that run then fails to start, the tick is not tried again (it may have
// started), and its history says it did not run and why: never "done"
// with nothing to show for it.
func TestCommittedTickWhoseRunFailsToStartIsRecordedNotRun(t *testing.T) {
	m := newCMMasters(t, 1)
	d := &cmDisp{err: errors.New("exec: \"nosuch\": executable file not found in $PATH")}
	s := m.replica(t, false, true, time.Minute, d, WithReplica("R"))
	at := dueTick()
	s.runBatch(context.Background(), batchOf(s, at, "c"))
	settleRetries(s, 3)
	_, notRun := d.counts()
	if len(notRun) != 1 || !strings.Contains(notRun[0], "did not start") || !strings.Contains(notRun[0], "nosuch") {
		t.Fatalf("not-run records %q, want one saying the run did not start, and why", notRun)
	}
	if recs := m.records(t, s, at); recs[0] != "done" {
		t.Errorf("records %q: the tick must stay decided (it is not tried again)", recs)
	}
}

// A tick recorded done whose writer key holds no "<token>:<fence>" with a
// fence an acquire could issue (text, 0, beyond 2^53-1) is reported corrupt,
// naming the writer key: never read as a claim's own record with a fence
// Lua's doubles would round or turn negative.
func TestCorruptTickWriterIsReported(t *testing.T) {
	m := newCMMasters(t, 1)
	s := m.replica(t, false, true, time.Minute, &cmDisp{})
	at := dueTick()
	ctx := context.Background()
	key := s.keysOf(s.jobs["c"]).tickKey(at)
	for _, by := range []string{"abc", "ab12:0", "ab12:9223372036854775807", "ab12:9007199254740992", "ab12:-5"} {
		m.direct[0].Set(ctx, key, "done", time.Minute)
		m.direct[0].Set(ctx, writerKey(key), by, time.Minute)
		b := s.prepare(ctx, batchOf(s, at, "c"))
		b = append(b, item{job: s.jobs["c"], at: at, claim: &claimState{key: key, token: "ab12"}}) // the claim that wrote it
		for i := range b {
			err := s.claim(ctx, b)[0][i].err
			var ce *quorum.CorruptError
			if !errors.As(err, &ce) || ce.Key != writerKey(key) || ce.Value != by {
				t.Errorf("writer %q, claim %d: %v, want a corrupt error naming %s", by, i, err, writerKey(key))
			}
		}
	}
	m.direct[0].Set(ctx, writerKey(key), "ab12:9007199254740991", time.Minute) // the last fence issued
	if a := s.claim(ctx, []item{{job: s.jobs["c"], at: at, claim: &claimState{key: key, token: "ab12"}}})[0][0]; a.err != nil || a.st != stMine || a.val != 1<<53-1 {
		t.Errorf("the last fence: %+v, want MINE with 2^53-1", a)
	}
}

// A commit moves the job's mark forward only, in one command when it does:
// an earlier tick's commit leaves a later mark, and a mark that holds no
// time (text, or a key of another type) is left as it was for the next
// claim to report.
func TestCommitMovesTheMarkForwardOnly(t *testing.T) {
	r := redistest.New(t).TestClient(t)
	ctx := context.Background()
	commit := func(mark string, at int64) error {
		return commitScript.Run(ctx, r, []string{"j@t", mark}, at, 60000).Err()
	}
	for _, tc := range []struct {
		name, before string
		at           int64
		after        string
	}{
		{"none", "", 2000, "2000"},
		{"earlier", "1000", 2000, "2000"},
		{"later", "3000", 2000, "3000"},
		{"same", "2000", 2000, "2000"},
		{"text", "abc", 2000, "abc"},
	} {
		mark := "mark:" + tc.name
		if tc.before != "" {
			if err := r.Set(ctx, mark, tc.before, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if err := commit(mark, tc.at); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if v, _ := r.Get(ctx, mark).Result(); v != tc.after {
			t.Errorf("%s: mark %q after a commit of %d, want %q", tc.name, v, tc.at, tc.after)
		}
		if ttl, _ := r.TTL(ctx, mark).Result(); ttl != -1 {
			t.Errorf("%s: mark expires in %v, want never", tc.name, ttl)
		}
	}
	if err := r.HSet(ctx, "mark:hash", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := commit("mark:hash", 2000); err != nil {
		t.Fatal(err)
	}
	if typ, _ := r.Type(ctx, "mark:hash").Result(); typ != "hash" {
		t.Errorf("a hash mark is now a %s", typ)
	}
	if v, _ := r.Get(ctx, "j@t").Result(); v != "done" {
		t.Errorf("tick record %q, want done", v)
	}
}

// Schedule: a job with no mark yet (new, or its lock master flushed) gets
// a tick before 1970 (unix ms below zero: a Backfill of an old tick, which
// the claim grants whatever its age) committed. The mark only moves
// forward from "none" (0): it must not become "-60000", which no claim can
// read (q_count: CORRUPT), so that every later claim of the job fails.
func TestCommitOfATickBefore1970LeavesNoUnreadableMark(t *testing.T) {
	r := redistest.New(t).TestClient(t)
	ctx := context.Background()
	const mark = "mark:pre1970"
	if err := commitScript.Run(ctx, r, []string{"j@old", mark}, int64(-60000), 60000).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Get(ctx, mark).Result(); err != redis.Nil {
		t.Errorf("mark %q (%v) after the commit of a tick before 1970, want none (the claim reads 0)", v, err)
	}
	// the job's next claim, of a tick due now (single master, no marker)
	now := time.Now().UnixMilli()
	keys := []string{"j@now", "paused", mark, "fence", "j@now:by"}
	err := claimScript.Run(ctx, r, keys, "ab12", now, 60000, 1000, 120000, "u", "", 1000, "").Err()
	if err != nil {
		t.Errorf("the next claim of the job: %v, want it granted", err)
	}
}

// Schedule: a mark holds text with an expiry (bad data: written by hand or
// by another program). The commit leaves a corrupt mark "as it was" for
// the next claim to report (the q_raise_mark contract): its value and its
// expiry, so bad data that would expire by itself is not made permanent.
func TestCommitLeavesACorruptMarksExpiry(t *testing.T) {
	r := redistest.New(t).TestClient(t)
	ctx := context.Background()
	const mark = "mark:corrupt-expiring"
	if err := r.Set(ctx, mark, "abc", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := commitScript.Run(ctx, r, []string{"j@t", mark}, int64(2000), 60000).Err(); err != nil {
		t.Fatal(err)
	}
	v, _ := r.Get(ctx, mark).Result()
	ttl, _ := r.PTTL(ctx, mark).Result()
	if v != "abc" || ttl <= 59*time.Minute {
		t.Errorf("corrupt mark %q, ttl %v after a commit, want \"abc\" expiring in about 1h as before", v, ttl)
	}
}
