package jobs

import (
	"fmt"
	"testing"
)

func TestFailureStreak(t *testing.T) {
	rec := func(s ...Status) []RunRecord {
		out := make([]RunRecord, len(s))
		for i, st := range s {
			out[i] = RunRecord{Status: st, RunID: fmt.Sprint(i)}
		}
		return out
	}
	for _, tc := range []struct {
		recs  []RunRecord
		n     int
		okRun string // "" none
	}{
		{nil, 0, ""},
		{rec(StatusOK, StatusFailed), 0, "0"},
		{rec(StatusRunning, StatusFailed, StatusMissed, StatusTimedOut, StatusSkipped, StatusLeaseLost, StatusOK, StatusFailed), 3, "6"},
		{rec(StatusFailed, StatusFailed), 2, ""},
		{rec(StatusPaused, StatusDispatched, StatusReplaced, StatusDropped), 0, ""},
	} {
		n, ok := FailureStreak(tc.recs)
		got := ""
		if ok != nil {
			got = ok.RunID
		}
		if n != tc.n || got != tc.okRun {
			t.Errorf("FailureStreak(%v) = %d, %q; want %d, %q", tc.recs, n, got, tc.n, tc.okRun)
		}
	}
}
