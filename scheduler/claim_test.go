package scheduler

import (
	"context"
	"strings"
	"testing"
	"time"

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
	rx.process(context.Background(), dropped)
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
	ry.process(context.Background(), retry)
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
	ry.process(context.Background(), rvBatch(ry, at, "c"))
	settleRetries(ry, 5)
	runs, notRun := dy.counts()
	if runs != 0 || len(notRun) != 1 {
		t.Fatalf("tick ran %d times, not-run records %q (records %q): want one not-run record", runs, notRun, m.records(t, ry, at))
	}
}
