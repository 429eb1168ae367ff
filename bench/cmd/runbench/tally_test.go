package main

import (
	"testing"
	"time"
)

func TestTallyCountsDuplicatesMissedAndFirstStartLag(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	obs := map[tickKey]*tickObs{
		{schedID(0), at.Unix()}: {dispatched: 1, runs: 1, firstDispatch: at.Add(10 * time.Millisecond), firstStart: at.Add(time.Second)},
		{schedID(1), at.Unix()}: {dispatched: 3, runs: 3, firstDispatch: at, firstStart: at.Add(2 * time.Second)},
		{schedID(2), at.Unix()}: {dispatched: 1, runs: 0, firstDispatch: at},
		// schedule 3: nothing at all; another instant's tick must not count
		{schedID(3), at.Add(time.Minute).Unix()}: {dispatched: 1, runs: 1, firstStart: at.Add(time.Minute)},
	}
	r := tally(at, "", 4, obs)
	if r.due != 4 || r.dispatched != 5 || r.started != 2 || r.duplicates != 1 || r.extra != 2 || r.missed != 2 {
		t.Fatalf("due %d dispatched %d started %d duplicates %d extra %d missed %d; want 4 5 2 1 2 2",
			r.due, r.dispatched, r.started, r.duplicates, r.extra, r.missed)
	}
	if len(r.lag) != 2 || r.lag[0] != time.Second || r.lag[1] != 2*time.Second {
		t.Fatalf("lag %v, want [1s 2s]", r.lag)
	}
	if len(r.dispatchLag) != 3 {
		t.Fatalf("dispatch lag %v, want 3 samples", r.dispatchLag)
	}
}
