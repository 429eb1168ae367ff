package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Ticks held back by an outage beyond the newest maxHeld of a job are let
// go: each gets its not-run record with why (no master decided them), not
// only a count and a log line.
func TestTicksLetGoAfterALongOutageAreRecordedNotRun(t *testing.T) {
	m := newCMMasters(t, 1)
	d := &cmDisp{}
	s := m.replica(t, false, false, time.Minute, d, WithReplica("R"))
	at := dueTick().Add(-time.Duration(maxHeld+2) * time.Second)
	down := errors.New("lock masters not answering")
	for i := range maxHeld + 2 {
		s.hold(item{job: s.jobs["c"], at: at.Add(time.Duration(i) * time.Second), attempts: 1}, down)
	}
	_, notRun := d.counts()
	if len(notRun) != 2 || !strings.Contains(notRun[0], "outage") {
		t.Fatalf("not-run records %q, want one for each of the two oldest ticks, saying why", notRun)
	}
	if n := len(s.held.byJob["c"]); n != maxHeld {
		t.Errorf("%d ticks held, want %d", n, maxHeld)
	}
}
func TestFollowerDelayGrowsWithTheInstant(t *testing.T) {
	for _, c := range []struct {
		due  int
		want time.Duration
	}{{0, 500 * time.Millisecond}, {999, 500 * time.Millisecond}, {1000, 600 * time.Millisecond}, {10000, 1500 * time.Millisecond}} {
		if got := followerDelay(500*time.Millisecond, c.due); got != c.want {
			t.Errorf("followerDelay(500ms, %d) = %v, want %v", c.due, got, c.want)
		}
	}
}
