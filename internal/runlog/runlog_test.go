package runlog

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/redistest"
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

// A runtime schedule whose run failed is in the index of failing ones
// (since its first failure) until a run ends otherwise; a run that ends
// after its schedule was deleted does not bring it back; a job of the
// list is never in it.
func TestFailedRunsOfRuntimeSchedulesIndexed(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	cfg, err := config.Load([]byte("redis: {url: \"redis://" + srv.Addr() + "/0\"}\nnamespace: ix\njobs:\n  - name: listed\n    schedule: \"@hourly\"\n    exec: {command: [\"true\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(cfg, rdb, slog.New(slog.DiscardHandler))
	rdb.HSet(ctx, "ix:{schedules}:defs", "a", "x", "b", "x")
	end := func(job, status string) {
		w.Finished(ctx, worktest.TickOf(job, 1), &config.Job{Name: job}, End{Replica: "r1", Attempt: 1, Status: status})
	}
	index := func() []string { return rdb.ZRange(ctx, FailingKey(cfg, "a"), 0, -1).Val() }
	end("@a", "failed")
	end("@b", "timed out")
	end("listed", "failed")
	since := rdb.ZScore(ctx, FailingKey(cfg, "a"), "a").Val()
	end("@a", "lease lost")
	if got := index(); fmt.Sprint(got) != "[a b]" || rdb.ZScore(ctx, FailingKey(cfg, "a"), "a").Val() != since {
		t.Fatalf("index %v: want a (since its first failure) and b", got)
	}
	end("@a", "ok")
	rdb.HDel(ctx, "ix:{schedules}:defs", "b")
	rdb.ZRem(ctx, FailingKey(cfg, "a"), "b") // as DeleteSchedule does
	end("@b", "failed")                      // a run that ends after the delete
	if got := index(); len(got) != 0 {
		t.Fatalf("index %v: want none", got)
	}
}
