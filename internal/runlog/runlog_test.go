package runlog

import (
	"fmt"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/scheduler"
)

// Every history event carries its format version as its first field.
func TestHistoryEventsCarryFormatVersion(t *testing.T) {
	tick := scheduler.Tick{Job: "report", At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), RunID: "r1", Manual: true}
	got := fmt.Sprint(tickFields(EvStarted, tick))
	if want := "[v 1 ev started tick 2026-11-28T12:00:00Z run r1 manual 1]"; got != want {
		t.Fatalf("fields %s, want %s", got, want)
	}
}

// A backfilled tick's events say so (a backfill, or a resume's replay):
// the tick ledger tells it from a run of the live schedule.
func TestHistoryEventsMarkBackfill(t *testing.T) {
	tick := scheduler.Tick{Job: "report", At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), RunID: "r1", Backfill: true}
	got := fmt.Sprint(tickFields(EvStarted, tick))
	if want := "[v 1 ev started tick 2026-11-28T12:00:00Z run r1 backfill 1]"; got != want {
		t.Fatalf("fields %s, want %s", got, want)
	}
}

// CleanReason drops, from each line, what a history record already says:
// the package prefixes, the tick and the job's name.
func TestCleanReason(t *testing.T) {
	tk := worktest.TickOf("report", 1)
	for _, tc := range []struct{ in, want string }{
		{"jobs: " + tk.ID() + `: jobs: job "report": exec "x": file not found`, `exec "x": file not found`},
		{`jobs: non-zero exit: job "report": "sh" exited with code 3`, `non-zero exit: "sh" exited with code 3`},
		{`jobs: job "report": http GET https://h/: EOF` + "\njobs: " + tk.ID() + ": execution lease lost mid-run: locking: lost",
			"http GET https://h/: EOF\nexecution lease lost mid-run: locking: lost"},
		{`job "other": stays; the jobs: word stays`, `job "other": stays; the jobs: word stays`},
		{"past its starting deadline", "past its starting deadline"},
	} {
		if got := CleanReason(tk, tc.in); got != tc.want {
			t.Errorf("CleanReason(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
