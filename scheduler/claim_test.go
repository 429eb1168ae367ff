package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

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
	dropped := rvBatch(rx, at, "c")
	dropped[0].drop = true
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
	at := rvTick()
	dropOnAOnly(t, m, rx, at)
	if recs := m.records(t, rx, at); recs[0] != "missed" || recs[1] != "<none>" || recs[2] != "<none>" {
		t.Fatalf("records %q: want A's missed alone (the schedule needs it)", recs)
	}

	retry := rvBatch(ry, at, "c")
	retry[0].follower, retry[0].attempts = true, 1
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
	at := rvTick()
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
	at := rvTick()
	dropOnAOnly(t, m, rx, at)
	rvRetries(rx)                                                   // R_x dies: its retries never run
	time.Sleep(time.Until(at.Add(deadline + 200*time.Millisecond))) // real time: the masters' clocks decide "missed"
	ry.runBatch(context.Background(), rvBatch(ry, at, "c"))
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
		{"a backfill's tick is past its deadline anyway: not clamped", item{at: now.Add(-59500 * time.Millisecond), backfill: true}, []answer{a(stBusy, 5000), a(stBusy, 5000), a(stBusy, 5000)},
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
		{"left out by the catch-up policy, leased elsewhere: its owner dispatches it", item{drop: true}, []answer{a(stBusy, 100), a(stBusy, 100), a(stBusy, 100)},
			want{kind: decLeased}},
		{"left out by the catch-up policy, masters failing again: held back", item{drop: true, attempts: 1}, []answer{e(fail), e(fail), e(fail)},
			want{kind: decHold, err: fail}},
		{"paused on a quorum", item{}, []answer{a(stPaused, 0), a(stPaused, 0), a(stOwned, 1)},
			want{kind: decNotRun, paused: true, counted: true, reason: "the job is paused"}},
		{"paused, over this claim's own commit on one master", item{}, []answer{a(stPaused, 0), a(stPaused, 0), a(stMine, 3)},
			want{kind: decNotRun, paused: true, counted: true, unrecord: "paused", reason: "its commit before the run reached only some lock masters; the job is paused"}},
		{"missed, recorded by this claim: counted", item{}, []answer{first(stMissed, 61000), first(stMissed, 61000), a(stMissed, 61000)},
			want{kind: decNotRun, counted: true, why: missedLate, reason: "past its starting deadline (1m1s late"}},
		{"missed, recorded by another claim: recorded, not counted", item{}, []answer{a(stMissed, 61000), a(stMissed, 61000), a(stMissed, 61000)},
			want{kind: decNotRun, why: missedLate, reason: "past its starting deadline"}},
		{"missed, recorded on the first master by an earlier attempt: counted", item{missedOn: 1}, []answer{a(stMissed, 61000), first(stMissed, 61000), e(fail)},
			want{kind: decNotRun, counted: true, why: missedLate, reason: "past its starting deadline"}},
		{"left out by the catch-up policy", item{drop: true}, []answer{first(stMissed, 10000), first(stMissed, 10000), first(stMissed, 10000)},
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
