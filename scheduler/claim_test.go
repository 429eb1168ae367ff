package scheduler

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/internal/quorum"
	"github.com/batonhq/baton/internal/redistest"
)

// dropOnAOnly has rx (through the proxies of m's three masters) claim tick
// at as its catch-up policy's drop while its links to B and C are cut: A
// alone records it missed. The links are back when it returns.
func dropOnAOnly(t *testing.T, m *cmMasters, rx *Scheduler, at time.Time) {
	t.Helper()
	bc := []int{1, 2}
	if err := onProxies(m, bc, (*redistest.Proxy).Cut)(); err != nil {
		t.Fatal(err)
	}
	dropped := batchOf(rx, at, "c")
	dropped[0].kind = kindDrop
	rx.runBatch(context.Background(), dropped)
	if err := onProxies(m, bc, (*redistest.Proxy).Restore)(); err != nil {
		t.Fatal(err)
	}
}

// Schedule: three masters. R_x comes back from an outage and its catch-up
// policy leaves tick T out; that claim reaches only A (its links to B and C
// still cut), so A alone records T "missed", and no quorum decided
// anything. R_y, alive all along, claims T again within its starting
// deadline, as a follower (a retry): a minority's "missed" must not read as
// decided there, as it does not in the claim: B and C grant T and it runs,
// once. R_x, back, finds it done.
func TestMinorityMissedRecordDoesNotSkipTheTick(t *testing.T) {
	m := newCMMasters(t, 3)
	dx, dy := &cmDisp{}, &cmDisp{}
	rx := m.replica(t, true, false, time.Minute, dx, WithReplica("Rx"), WithMasterTimeout(300*time.Millisecond))
	ry := m.replica(t, false, false, time.Minute, dy, WithReplica("Ry"))
	at := dueTick()
	dropOnAOnly(t, m, rx, at)
	if recs := m.records(t, rx, at); recs[0] != "missed" || recs[1] != "<none>" || recs[2] != "<none>" {
		t.Fatalf("records %q: want A's missed alone (the schedule needs it)", recs)
	}

	retry := batchOf(ry, at, "c")
	retry[0].kind, retry[0].attempts = kindFollower, 1
	ry.runBatch(context.Background(), retry)
	settleRetries(ry, 5)
	settleRetries(rx, 5)
	runsX, notRunX := dx.counts()
	runsY, notRunY := dy.counts()
	if runsX+runsY != 1 {
		t.Fatalf("tick ran %d times (Rx %d, Ry %d; not-run records %q, %q), want once: a quorum never decided it",
			runsX+runsY, runsX, runsY, notRunX, notRunY)
	}
}

// Schedule: as above, with no other replica: R_x's catch-up claim of T
// reaches only A, then its links come back. Its retry (the same claim)
// completes the "missed" record to a quorum, and since its own first
// attempt wrote A's record, it is the one that records T as not run, with
// why: the tick is not left with no run and no record.
func TestMinorityMissedRecordCompletedIsRecordedNotRun(t *testing.T) {
	m := newCMMasters(t, 3)
	d := &cmDisp{}
	rx := m.replica(t, true, false, time.Minute, d, WithReplica("Rx"), WithMasterTimeout(300*time.Millisecond))
	at := dueTick()
	dropOnAOnly(t, m, rx, at)
	settleRetries(rx, 5)
	runs, notRun := d.counts()
	if runs != 0 || len(notRun) != 1 || !strings.Contains(notRun[0], "catch-up") {
		t.Fatalf("tick ran %d times, not-run records %q: want none run and one record saying the catch-up policy left it out", runs, notRun)
	}
	n := 0
	for _, v := range m.records(t, rx, at) {
		if v == "missed" {
			n++
		}
	}
	if n < 2 {
		t.Errorf("records %q: want missed on a quorum", m.records(t, rx, at))
	}
}

// Schedule: three masters. R_x's catch-up claim of tick T reaches only A
// (links to B and C cut), so A alone records T "missed"; R_x dies there.
// R_y claims T after its starting deadline: B and C record it missed, a
// quorum says missed, and the tick must be recorded as not run with why,
// although the claim that wrote the first master's record never will.
func TestMissedRecordOfADeadClaimIsRecordedNotRun(t *testing.T) {
	m := newCMMasters(t, 3)
	dx, dy := &cmDisp{}, &cmDisp{}
	const deadline = 2 * time.Second
	rx := m.replica(t, true, false, deadline, dx, WithReplica("Rx"), WithMasterTimeout(300*time.Millisecond))
	ry := m.replica(t, false, false, deadline, dy, WithReplica("Ry"))
	at := dueTick()
	dropOnAOnly(t, m, rx, at)
	drainRetries(rx)                                                // R_x dies: its retries never run
	time.Sleep(time.Until(at.Add(deadline + 200*time.Millisecond))) // real time: the masters' clocks decide "missed"
	ry.runBatch(context.Background(), batchOf(ry, at, "c"))
	settleRetries(ry, 5)
	runs, notRun := dy.counts()
	if runs != 0 || len(notRun) != 1 {
		t.Fatalf("tick ran %d times, not-run records %q (records %q): want one not-run record", runs, notRun, m.records(t, ry, at))
	}
}

// The decisions of a claim, from three masters' answers to it: what
// becomes of the tick (dispatched, done, claimed again and when, held back,
// recorded not run and why) and what is undone on the masters (a lease
// given up, this claim's own "done" replaced).
func TestClaimDecisions(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 30, 0, time.UTC)
	const backoff = 40 * time.Millisecond
	job := &Job{Name: "j", StartingDeadline: time.Minute, Catchup: CatchupLatest}
	tick := now.Add(-10 * time.Second)
	fail := errors.New("i/o timeout")
	corrupt := fmt.Errorf("key: %w", quorum.ErrCorrupt)
	a := func(st, val int64) answer { return answer{st: st, val: val} }
	first := func(st, val int64) answer { return answer{st: st, val: val, first: true} }
	e := func(err error) answer { return answer{err: err} }
	type want struct {
		kind     decisionKind
		fence    int64
		synced   bool
		at       time.Time
		early    bool
		err      error
		release  bool
		unrecord string
		paused   bool
		counted  bool
		why      missedWhy
		reason   string // a part of it
	}
	cases := []struct {
		name    string
		it      item
		answers []answer
		want    want
	}{
		{"owned on every master, one fence", item{}, []answer{a(stOwned, 7), a(stOwned, 7), a(stOwned, 7)},
			want{kind: decOwned, fence: 7, synced: true}},
		{"owned on a quorum, fences differ: the largest, to be raised", item{}, []answer{a(stOwned, 5), a(stOwned, 7), e(fail)},
			want{kind: decOwned, fence: 7}},
		{"this claim's own record counts as granting", item{}, []answer{a(stMine, 7), a(stOwned, 7), a(stBusy, 100)},
			want{kind: decOwned, fence: 7, synced: true}},
		{"done on one master is done", item{}, []answer{a(stOwned, 7), a(stDone, 0), a(stOwned, 7)},
			want{kind: decDone}},
		{"another claim's record before its run on a quorum is done", item{}, []answer{a(stDoneBy, 0), a(stDoneBy, 0), a(stOwned, 1)},
			want{kind: decDone}},
		{"leased elsewhere: again when the lease ends", item{}, []answer{a(stBusy, 3000), a(stBusy, 2000), e(fail)},
			want{kind: decRetry, at: now.Add(3001 * time.Millisecond)}},
		{"leased elsewhere: again no later than just past the deadline", item{at: now.Add(-59500 * time.Millisecond)}, []answer{a(stBusy, 5000), a(stBusy, 5000), a(stBusy, 5000)},
			want{kind: decRetry, at: now.Add(1501 * time.Millisecond)}},
		{"a backfill's tick is past its deadline anyway: not clamped", item{at: now.Add(-59500 * time.Millisecond), kind: kindBackfill}, []answer{a(stBusy, 5000), a(stBusy, 5000), a(stBusy, 5000)},
			want{kind: decRetry, at: now.Add(5001 * time.Millisecond)}},
		{"split vote: released, again after the back-off", item{}, []answer{a(stOwned, 1), a(stBusy, 5000), a(stAbstain, 1)},
			want{kind: decRetry, at: now.Add(backoff + time.Millisecond), release: true}},
		{"not due by a master's clock: released, again when it is", item{at: now.Add(time.Second)}, []answer{a(stOwned, 1), a(stOwned, 1), a(stEarly, 400)},
			want{kind: decRetry, at: now.Add(401 * time.Millisecond), early: true, release: true}},
		{"masters failing: again after the back-off", item{}, []answer{e(fail), e(fail), a(stOwned, 1)},
			want{kind: decRetry, at: now.Add(backoff + time.Millisecond), err: fail, release: true}},
		{"masters failing again: held back", item{attempts: 1}, []answer{e(fail), e(fail), a(stOwned, 1)},
			want{kind: decHold, err: fail}},
		{"a corrupt counter: nothing dispatched on it", item{}, []answer{e(corrupt), a(stOwned, 1), a(stOwned, 1)},
			want{kind: decRetry, at: now.Add(backoff + time.Millisecond), err: quorum.ErrCorrupt, release: true}},
		{"left out by the catch-up policy, leased elsewhere: its owner dispatches it", item{kind: kindDrop}, []answer{a(stBusy, 100), a(stBusy, 100), a(stBusy, 100)},
			want{kind: decLeased}},
		{"left out by the catch-up policy, masters failing again: held back", item{kind: kindDrop, attempts: 1}, []answer{e(fail), e(fail), e(fail)},
			want{kind: decHold, err: fail}},
		{"paused on a quorum", item{}, []answer{a(stPaused, 0), a(stPaused, 0), a(stOwned, 1)},
			want{kind: decNotRun, paused: true, counted: true, reason: "the job is paused"}},
		{"paused, over this claim's own commit on one master", item{}, []answer{a(stPaused, 0), a(stPaused, 0), a(stMine, 3)},
			want{kind: decNotRun, paused: true, counted: true, unrecord: "paused", reason: "its commit before the run reached only some lock masters; the job is paused"}},
		{"missed, recorded by this claim: counted", item{}, []answer{first(stMissed, 61000), first(stMissed, 61000), a(stMissed, 61000)},
			want{kind: decNotRun, counted: true, why: missedLate, reason: "past its starting deadline (1m1s late"}},
		{"missed, recorded by another claim: recorded, not counted", item{}, []answer{a(stMissed, 61000), a(stMissed, 61000), a(stMissed, 61000)},
			want{kind: decNotRun, why: missedLate, reason: "past its starting deadline"}},
		{"missed, recorded on the first master by an earlier attempt: counted", item{claim: &claimState{missedOn: 1}}, []answer{a(stMissed, 61000), first(stMissed, 61000), e(fail)},
			want{kind: decNotRun, counted: true, why: missedLate, reason: "past its starting deadline"}},
		{"left out by the catch-up policy", item{kind: kindDrop}, []answer{first(stMissed, 10000), first(stMissed, 10000), first(stMissed, 10000)},
			want{kind: decNotRun, counted: true, why: missedLeftOut, reason: "left out by the catch-up policy latest"}},
		{"missed over this claim's own commit on one master", item{}, []answer{a(stMine, 3), first(stMissed, 61000), first(stMissed, 61000)},
			want{kind: decNotRun, counted: true, unrecord: "missed", why: missedLate, reason: "its commit before the run reached only some lock masters; past its starting deadline"}},
		{"no majority can vouch: missed", item{}, []answer{a(stAbstain, 5), a(stAbstain, 5), a(stOwned, 1)},
			want{kind: decNotRun, counted: true, release: true, why: missedUnknown, reason: "no majority of lock masters could vouch"}},
		{"another claim's record before its run, no lease left: missed", item{}, []answer{a(stDoneBy, 0), a(stAbstain, 5), e(fail)},
			want{kind: decNotRun, counted: true, why: missedUnknown, reason: "no majority of lock masters could vouch"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			it := c.it
			it.job = job
			if it.at.IsZero() {
				it.at = tick
			}
			d := decide(it, c.answers, now, backoff)
			w := c.want
			got := want{kind: d.kind, fence: d.fence, synced: d.synced, at: d.at, early: d.early, err: d.err,
				release: d.release, unrecord: d.unrecord, paused: d.paused, counted: d.counted, why: d.why, reason: d.reason}
			if !errors.Is(got.err, w.err) || (got.err == nil) != (w.err == nil) {
				t.Errorf("err %v, want %v", got.err, w.err)
			}
			if !strings.Contains(got.reason, w.reason) || (got.reason == "") != (w.reason == "") {
				t.Errorf("reason %q, want it to say %q", got.reason, w.reason)
			}
			got.err, got.reason, w.err, w.reason = nil, "", nil, ""
			if got != w {
				t.Errorf("decision %+v, want %+v", got, w)
			}
		})
	}
}

// The tests below drive process() on real redis-servers with crafted
// batches whose ticks end differently (done, busy, paused, owned with
// agreeing or diverging fences, a fence write-back whose reply is lost, a
// lease taken over while waiting for a dispatch slot, a commit-first record
// refused, a failed dispatch, a shutdown): every owned tick is dispatched
// with its own job, instant and fence, committed once, and every other one
// released and retried, never dispatched.

// recDisp records dispatched ticks; before may fail or hold a dispatch.
type recDisp struct {
	mu     sync.Mutex
	got    []Tick
	tries  []Tick // every call, failed ones too
	before func(ctx context.Context, t Tick) error
}

func (d *recDisp) Dispatch(ctx context.Context, t Tick) error {
	d.mu.Lock()
	d.tries = append(d.tries, t)
	d.mu.Unlock()
	if d.before != nil {
		if err := d.before(ctx, t); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.got = append(d.got, t)
	d.mu.Unlock()
	return nil
}

func (d *recDisp) dispatched() map[string]Tick {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]Tick{}
	for _, t := range d.got {
		if _, dup := out[t.Job]; dup {
			panic("tick of " + t.Job + " dispatched twice")
		}
		out[t.Job] = t
	}
	return out
}

func (d *recDisp) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// claimSetup starts n redis-servers and a scheduler over them (not Run: the
// tests call process directly).
func claimSetup(t *testing.T, n int, names []string, commitFirst map[string]bool, d Dispatcher, opts ...Option) (*Scheduler, []*redis.Client) {
	t.Helper()
	servers := redistest.NewN(t, n)
	rdbs := make([]*redis.Client, n)
	ms := make([]redis.UniversalClient, n)
	for i, s := range servers {
		rdbs[i] = s.TestClient(t)
		ms[i] = rdbs[i]
	}
	locks, sched := preparedLocks(t, ms), everySecond(t)
	var jobs []Job
	for _, name := range names {
		jobs = append(jobs, Job{Name: name, Schedule: sched, StartingDeadline: time.Minute, CommitFirst: commitFirst[name]})
	}
	s, err := New(locks, jobs, d, append([]Option{WithReplica("rv")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s, rdbs
}

// dueTick is a tick due a moment ago: inside the starting deadline, not early.
func dueTick() time.Time { return time.Now().Add(-time.Second).Truncate(time.Second).UTC() }

func batchOf(s *Scheduler, at time.Time, names ...string) []item {
	var b []item
	for _, n := range names {
		b = append(b, item{job: s.jobs[n], at: at, fireAt: at})
	}
	return b
}

// drainRetries drains what process rescheduled.
func drainRetries(s *Scheduler) map[string]item {
	out := map[string]item{}
	for {
		select {
		case its := <-s.retry:
			for _, it := range its {
				out[it.job.Name] = it
			}
		default:
			return out
		}
	}
}

func getKey(t *testing.T, rdb *redis.Client, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func setKey(t *testing.T, rdb *redis.Client, key, val string, ttl time.Duration) {
	t.Helper()
	if err := rdb.Set(context.Background(), key, val, ttl).Err(); err != nil {
		t.Fatal(err)
	}
}

var tokenRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// loseRaiseReplies drops the replies (not the commands) of the fence
// write-backs (raise.lua: one key, the job's fence counter) of one job on
// one master: the write happens, its answer is lost.
type loseRaiseReplies struct {
	fenceKey string
	armed    *atomic.Bool
}

func (h loseRaiseReplies) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h loseRaiseReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h loseRaiseReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if !h.armed.Load() {
			return err
		}
		for _, c := range cmds {
			a := c.Args()
			if len(a) >= 4 && strings.HasPrefix(fmt.Sprint(a[0]), "eval") && fmt.Sprint(a[2]) != "0" && a[3] == h.fenceKey {
				c.SetErr(errors.New("lost reply"))
			} else if cmd, ok := c.(*redis.Cmd); ok {
				loseChunkedReply(cmd, h.fenceKey)
			}
		}
		return err
	}
}

// loseChunkedReply turns the answer of the call whose first key is key, in a
// chunk of script calls sent as one (see quorum's many.lua), into a lost
// reply, the other calls' answers kept.
func loseChunkedReply(cmd *redis.Cmd, key string) {
	a := cmd.Args()
	vals, err := cmd.Slice()
	if err != nil || len(a) < 4 || !strings.HasPrefix(fmt.Sprint(a[0]), "eval") {
		return
	}
	nkeys, _ := strconv.Atoi(fmt.Sprint(a[2]))
	if 3+nkeys >= len(a) {
		return
	}
	n, _ := strconv.Atoi(fmt.Sprint(a[3+nkeys]))
	if n != len(vals) {
		return
	}
	ki, ai := 3, 4+nkeys
	for i := range n {
		nk, _ := strconv.Atoi(fmt.Sprint(a[ai]))
		na, _ := strconv.Atoi(fmt.Sprint(a[ai+1]))
		if nk >= 1 && a[ki] == key { // a raise: the counter, then the forgotten floor
			vals[i] = errors.New("lost reply")
		}
		ki += nk
		ai += 2 + na
	}
}

// One batch on three masters whose ticks end every way a claim can: done
// (on one master), busy (leased elsewhere), paused (on a quorum), owned with
// agreeing fences, owned with diverging fences (written back to a
// majority), and owned with diverging fences whose write-back replies are
// lost on two masters. Only the two owned-and-synced ticks are dispatched,
// each with its own job and fence; they are committed on every master; the
// lost one is released and retried with its token, and its retry is
// dispatched with a fence above every fence issued before (G4); the busy one
// is retried, its holder's lease untouched (G5).
func TestMixedBatchDispatchesOnlySyncedOwnedTicksWithTheirOwnFences(t *testing.T) {
	d := &recDisp{}
	names := []string{"rv-done", "rv-busy", "rv-unsynced", "rv-agree", "rv-paused", "rv-lostraise"}
	s, rdbs := claimSetup(t, 3, names, nil, d)
	at := dueTick()
	key := func(n string) string { return s.keysOf(s.jobs[n]).tickKey(at) }
	fence := func(n string) string { return s.keysOf(s.jobs[n]).fence() }
	const day = 24 * time.Hour
	setKey(t, rdbs[1], key("rv-done"), "done", time.Minute)
	for _, r := range rdbs {
		setKey(t, r, key("rv-busy"), "other-owner", time.Minute)
		setKey(t, r, fence("rv-agree"), "3000000000000000", day)
	}
	setKey(t, rdbs[0], fence("rv-unsynced"), "4000000000000000", day)
	setKey(t, rdbs[1], fence("rv-unsynced"), "3000000000000000", day)
	setKey(t, rdbs[2], fence("rv-unsynced"), "3000000000000000", day)
	setKey(t, rdbs[0], fence("rv-lostraise"), "5000000000000000", day)
	setKey(t, rdbs[1], fence("rv-lostraise"), "3000000000000000", day)
	setKey(t, rdbs[2], fence("rv-lostraise"), "3000000000000000", day)
	setKey(t, rdbs[0], s.keysOf(s.jobs["rv-paused"]).paused(), "1", 0)
	setKey(t, rdbs[1], s.keysOf(s.jobs["rv-paused"]).paused(), "1", 0)
	var armed atomic.Bool
	armed.Store(true)
	rdbs[1].AddHook(loseRaiseReplies{fence("rv-lostraise"), &armed})
	rdbs[2].AddHook(loseRaiseReplies{fence("rv-lostraise"), &armed})

	batch := batchOf(s, at, names...)
	s.runBatch(context.Background(), batch)

	got := d.dispatched()
	if len(got) != 2 {
		t.Fatalf("dispatched %v, want rv-unsynced and rv-agree only", got)
	}
	for n, want := range map[string]int64{"rv-unsynced": 4000000000000001, "rv-agree": 3000000000000001} {
		tk, ok := got[n]
		if !ok {
			t.Errorf("%s not dispatched (got %v)", n, got)
			continue
		}
		if !tk.At.Equal(at) || tk.Fence != want || tk.Replica != "rv" || !tokenRE.MatchString(tk.RunID) {
			t.Errorf("%s dispatched as %+v, want at %v fence %d, a 32-hex run id", n, tk, at, want)
		}
		for m, r := range rdbs {
			if v := getKey(t, r, key(n)); v != "done" {
				t.Errorf("%s on master %d: %q, want done", n, m, v)
			}
			if v := getKey(t, r, s.keysOf(s.jobs[n]).mark()); v != strconv.FormatInt(at.UnixMilli(), 10) {
				t.Errorf("%s mark on master %d: %q", n, m, v)
			}
		}
	}
	for m, r := range rdbs {
		if c, _ := strconv.ParseInt(getKey(t, r, fence("rv-unsynced")), 10, 64); c < 4000000000000001 {
			t.Errorf("rv-unsynced fence counter on master %d is %d, below the fence dispatched", m, c)
		}
		if v := getKey(t, r, key("rv-busy")); v != "other-owner" {
			t.Errorf("rv-busy lease on master %d: %q, want the other owner's", m, v)
		}
		if v := getKey(t, r, key("rv-lostraise")); v != "<none>" {
			t.Errorf("rv-lostraise on master %d: %q, want released", m, v)
		}
	}
	st := s.Stats()
	if st.Owned != 3 || st.Done != 1 || st.Busy != 1 || st.Paused != 1 || st.Dispatched != 2 || st.Missed != 0 || st.DispatchErrors != 0 || st.CommitErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	retries := drainRetries(s)
	if len(retries) != 2 {
		t.Fatalf("retries %v, want rv-busy and rv-lostraise", retries)
	}
	lost, ok := retries["rv-lostraise"]
	if !ok || lost.token() != batch[5].token() || lost.attempts != 1 || !lost.at.Equal(at) {
		t.Fatalf("rv-lostraise retry %+v (claimed with token %s)", lost, batch[5].token())
	}
	if _, ok := retries["rv-busy"]; !ok {
		t.Fatal("rv-busy not retried")
	}

	// the retry, replies no longer lost: dispatched once, fence above all
	armed.Store(false)
	s.runBatch(context.Background(), []item{lost})
	got = d.dispatched()
	tk, ok := got["rv-lostraise"]
	if !ok {
		t.Fatalf("rv-lostraise not dispatched on its retry (got %v, retries %v)", got, drainRetries(s))
	}
	if tk.Fence <= 5000000000000001 {
		t.Errorf("rv-lostraise retry fence %d, want above 5000000000000001 (issued to the lost claim)", tk.Fence)
	}
	for m, r := range rdbs {
		if v := getKey(t, r, key("rv-lostraise")); v != "done" {
			t.Errorf("rv-lostraise on master %d after its retry: %q", m, v)
		}
	}
}

// Parallelism 1: while the first ticks are being dispatched (each within
// the lease ttl that bounds a dispatch), the others wait for a slot and
// their leases are extended every third of the lease ttl. The lease of one
// waiting tick is taken over by another replica (its lease expired, say):
// at the next extension it is dropped, released token-checked (the other
// replica's lease stays) and retried, never dispatched here; the last one
// stays leased past its first lease ttl and is dispatched with its own
// fence (not the dropped tick's, nor its neighbours').
func TestLeaseLostWhileWaitingIsDroppedAndTheRestKeepTheirFences(t *testing.T) {
	const ttl = 600 * time.Millisecond
	entered := make(chan struct{}, 1)
	d := &recDisp{before: func(ctx context.Context, tk Tick) error {
		if tk.Job == "rv-a" || tk.Job == "rv-x" {
			if tk.Job == "rv-a" {
				entered <- struct{}{}
			}
			select {
			case <-time.After(ttl * 4 / 5):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	names := []string{"rv-a", "rv-b", "rv-x", "rv-c"}
	s, rdbs := claimSetup(t, 1, names, nil, d, WithDispatchParallelism(1), WithTickLeaseTTL(ttl))
	rdb := rdbs[0]
	at := dueTick()
	for i, n := range names {
		setKey(t, rdb, s.keysOf(s.jobs[n]).fence(), strconv.Itoa(5+i)+"000000000000000", time.Hour)
	}
	began := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runBatch(context.Background(), batchOf(s, at, names...))
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("rv-a never dispatched")
	}
	keyB, keyC := s.keysOf(s.jobs["rv-b"]).tickKey(at), s.keysOf(s.jobs["rv-c"]).tickKey(at)
	setKey(t, rdb, keyB, "other-owner", time.Minute)
	time.Sleep(time.Until(began.Add(ttl + ttl/3))) // real time: rv-x being dispatched; rv-c waits past its first lease, which the masters' clocks end
	if v := getKey(t, rdb, keyC); !tokenRE.MatchString(v) {
		t.Errorf("rv-c's lease while it waits, past its first ttl: %q (want its token: extended)", v)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("process did not return")
	}
	got := d.dispatched()
	if _, ok := got["rv-b"]; ok || len(got) != 3 {
		t.Fatalf("dispatched %v, want rv-a, rv-x and rv-c", got)
	}
	for i, n := range names {
		if n == "rv-b" {
			continue
		}
		if want, _ := strconv.ParseInt(strconv.Itoa(5+i)+"000000000000001", 10, 64); got[n].Fence != want {
			t.Errorf("%s dispatched with fence %d, want %d", n, got[n].Fence, want)
		}
	}
	if v := getKey(t, rdb, keyB); v != "other-owner" {
		t.Errorf("rv-b: %q, want the other replica's lease", v)
	}
	if v := getKey(t, rdb, keyC); v != "done" {
		t.Errorf("rv-c: %q, want done", v)
	}
	if r := drainRetries(s); len(r) != 1 || r["rv-b"].job == nil {
		t.Errorf("retries %v, want rv-b only", r)
	}
	if st := s.Stats(); st.Owned != 4 || st.Dispatched != 3 || st.DispatchErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Local mode commits first: a commit-first tick is handed to the
// dispatcher only once its record is on a quorum (the dispatcher reads it
// there); one whose lease was taken over on two of three masters before
// its record is written is not dispatched at all, counted as a commit
// error, and retried.
func TestCommitFirstRunsOnlyAfterItsRecord(t *testing.T) {
	var rdbs []*redis.Client
	var s *Scheduler
	var at time.Time
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	var doneAtDispatch atomic.Int64
	d := &recDisp{before: func(ctx context.Context, tk Tick) error {
		n := 0
		for _, r := range rdbs {
			if v, _ := r.Get(ctx, s.keysOf(s.jobs[tk.Job]).tickKey(at)).Result(); v == "done" {
				n++
			}
		}
		doneAtDispatch.Store(int64(n))
		if tk.Job == "rv-l1" {
			entered <- struct{}{}
			<-gate
		}
		return nil
	}}
	s, rdbs = claimSetup(t, 3, []string{"rv-l1", "rv-l2"}, map[string]bool{"rv-l1": true, "rv-l2": true}, d,
		WithDispatchParallelism(1), WithTickLeaseTTL(30*time.Second))
	at = dueTick()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runBatch(context.Background(), batchOf(s, at, "rv-l1", "rv-l2"))
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("rv-l1 never dispatched")
	}
	if n := doneAtDispatch.Load(); n < 2 {
		t.Errorf("rv-l1 dispatched with its record on %d of 3 masters, want a quorum first", n)
	}
	key2 := s.keysOf(s.jobs["rv-l2"]).tickKey(at)
	setKey(t, rdbs[1], key2, "other-owner", time.Minute)
	setKey(t, rdbs[2], key2, "other-owner", time.Minute)
	close(gate)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("process did not return")
	}
	got := d.dispatched()
	if _, ok := got["rv-l2"]; ok || len(got) != 1 {
		t.Fatalf("dispatched %v, want rv-l1 only", got)
	}
	if st := s.Stats(); st.Owned != 2 || st.Dispatched != 1 || st.CommitErrors != 1 || st.DispatchErrors != 0 {
		t.Errorf("stats %+v", st)
	}
	for m := 1; m < 3; m++ {
		if v := getKey(t, rdbs[m], key2); v != "other-owner" {
			t.Errorf("rv-l2 on master %d: %q, want the other owner's lease", m, v)
		}
	}
	if r := drainRetries(s); len(r) != 1 || r["rv-l2"].job == nil {
		t.Errorf("retries %v, want rv-l2", r)
	}
}

// A failed dispatch releases the tick and retries it with its token; a
// dispatch answered ErrAlreadyDispatched counts as dispatched and is
// committed. The retry is dispatched once, with a fence above the failed
// attempt's (a new claim), and committed.
func TestFailedDispatchIsRetriedOnceAlreadyDispatchedIsCommitted(t *testing.T) {
	var failed atomic.Bool
	d := &recDisp{}
	d.before = func(ctx context.Context, tk Tick) error {
		switch tk.Job {
		case "rv-fail":
			if failed.CompareAndSwap(false, true) {
				return errors.New("queue down")
			}
		case "rv-dup":
			return fmt.Errorf("conflict: %w", ErrAlreadyDispatched)
		}
		return nil
	}
	s, rdbs := claimSetup(t, 1, []string{"rv-ok", "rv-fail", "rv-dup"}, nil, d)
	rdb := rdbs[0]
	at := dueTick()
	batch := batchOf(s, at, "rv-ok", "rv-fail", "rv-dup")
	s.runBatch(context.Background(), batch)
	for n, want := range map[string]string{"rv-ok": "done", "rv-dup": "done", "rv-fail": "<none>"} {
		if v := getKey(t, rdb, s.keysOf(s.jobs[n]).tickKey(at)); v != want {
			t.Errorf("%s: %q, want %s", n, v, want)
		}
	}
	if st := s.Stats(); st.Owned != 3 || st.Dispatched != 2 || st.DispatchErrors != 1 {
		t.Errorf("stats after the first batch %+v", st)
	}
	r := drainRetries(s)
	retry, ok := r["rv-fail"]
	if len(r) != 1 || !ok || retry.token() != batch[1].token() || retry.attempts != 1 {
		t.Fatalf("retries %+v", r)
	}
	s.runBatch(context.Background(), []item{retry})
	if v := getKey(t, rdb, s.keysOf(s.jobs["rv-fail"]).tickKey(at)); v != "done" {
		t.Errorf("rv-fail after its retry: %q", v)
	}
	got := d.dispatched()
	if len(got) != 2 || got["rv-fail"].Job == "" {
		t.Fatalf("dispatched %v", got)
	}
	var first int64
	d.mu.Lock()
	for _, tk := range d.tries {
		if tk.Job == "rv-fail" && first == 0 {
			first = tk.Fence
		}
	}
	d.mu.Unlock()
	if got["rv-fail"].Fence <= first {
		t.Errorf("retry fence %d not above the failed attempt's %d", got["rv-fail"].Fence, first)
	}
	if st := s.Stats(); st.Owned != 4 || st.Dispatched != 3 || st.DispatchErrors != 1 {
		t.Errorf("stats after the retry %+v", st)
	}
}

// Shutdown while ticks wait for a dispatch slot: the waiting ones are
// released, not dispatched; the one being dispatched, cut short, is
// released too; nothing is recorded done.
func TestShutdownReleasesWaitingTicks(t *testing.T) {
	entered := make(chan struct{}, 1)
	d := &recDisp{before: func(ctx context.Context, tk Tick) error {
		entered <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}}
	s, rdbs := claimSetup(t, 1, []string{"rv-x", "rv-y", "rv-z"}, nil, d, WithDispatchParallelism(1))
	at := dueTick()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.runBatch(ctx, batchOf(s, at, "rv-x", "rv-y", "rv-z"))
	}()
	<-entered
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("process did not return after shutdown")
	}
	if n := d.count(); n != 0 {
		t.Errorf("%d dispatched", n)
	}
	var tried []string
	d.mu.Lock()
	for _, tk := range d.tries {
		tried = append(tried, tk.Job)
	}
	d.mu.Unlock()
	sort.Strings(tried)
	if fmt.Sprint(tried) != "[rv-x]" {
		t.Errorf("dispatch calls %v, want rv-x only", tried)
	}
	for _, n := range []string{"rv-x", "rv-y", "rv-z"} {
		if v := getKey(t, rdbs[0], s.keysOf(s.jobs[n]).tickKey(at)); v != "<none>" {
			t.Errorf("%s after shutdown: %q, want released", n, v)
		}
	}
	if st := s.Stats(); st.Dispatched != 0 || st.DispatchErrors != 0 {
		t.Errorf("stats %+v", st)
	}
}
