package chain

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
)

// An outcome recorded reads back as written, its reason bounded, living
// the ttl given; none is written with none (no job runs after the job); a
// record that is not one reads as a failure saying so.
func TestOutcomesReadBackAsRecorded(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 2000)
	if err := Record(ctx, rdb, "baton", "extract", at, 2*time.Hour, Outcome{Status: jobs.StatusFailed, Reason: long}); err != nil {
		t.Fatal(err)
	}
	if err := Record(ctx, rdb, "baton", "load", at, 0, Outcome{Status: jobs.StatusOK}); err != nil {
		t.Fatal(err)
	}
	got, err := Read(ctx, rdb, "baton", []string{"extract", "load"}, at)
	if err != nil {
		t.Fatal(err)
	}
	if o := got["extract"]; o.Status != jobs.StatusFailed || len(o.Reason) != maxReason {
		t.Errorf("extract's outcome %q (%d bytes of reason)", o.Status, len(o.Reason))
	}
	if _, ok := got["load"]; ok {
		t.Errorf("load, recorded with no ttl (no job runs after it), has an outcome record")
	}
	if ttl := rdb.PTTL(ctx, Key("baton", "extract", at)).Val(); ttl <= time.Hour || ttl > 2*time.Hour {
		t.Errorf("the record lives %s, want 2h", ttl)
	}
	rdb.Set(ctx, Key("baton", "extract", at), "done:run-1", 0)
	got, _ = Read(ctx, rdb, "baton", []string{"extract"}, at)
	if o := got["extract"]; o.OK() || !strings.Contains(o.Reason, "an outcome record that is none") {
		t.Errorf("a record that is none reads as %+v", o)
	}
}

// A tick's first end that is not a success stands against a later one (a
// copy refused, a miss recorded by another replica); a success is written
// over any, and nothing but a success over it.
func TestASuccessIsNeverOverwrittenByALaterEnd(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC)
	read := func() Outcome {
		t.Helper()
		got, err := Read(ctx, rdb, "baton", []string{"extract"}, at)
		if err != nil {
			t.Fatal(err)
		}
		return got["extract"]
	}
	record := func(o Outcome) {
		t.Helper()
		if err := Record(ctx, rdb, "baton", "extract", at, time.Hour, o); err != nil {
			t.Fatal(err)
		}
	}
	record(Outcome{Status: jobs.StatusPaused, Reason: "the job is paused"})
	record(Outcome{Status: jobs.StatusMissed, Reason: "past its starting deadline"})
	if o := read(); o.Status != jobs.StatusPaused {
		t.Errorf("after paused then missed: %+v, want the first end", o)
	}
	record(Outcome{Status: jobs.StatusOK}) // a resume's catch-up ran it
	record(Outcome{Status: jobs.StatusRefused, Reason: "its tick's task ended already"})
	record(Outcome{Status: jobs.StatusMissed, Reason: "let go as missed"})
	if o := read(); !o.OK() {
		t.Errorf("after ok then refused and missed: %+v, want ok", o)
	}
}

// Forget deletes a record that says the tick was missed or paused, keeps
// a success and a failure, and is a no-op without a record.
func TestForgetDeletesOnlyAMissOrAPause(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	at := time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC)
	if err := Record(ctx, rdb, "baton", "paused", at, time.Hour, Outcome{Status: jobs.StatusPaused, Reason: "the job is paused"}); err != nil {
		t.Fatal(err)
	}
	if err := Record(ctx, rdb, "baton", "ran", at, time.Hour, Outcome{Status: jobs.StatusOK}); err != nil {
		t.Fatal(err)
	}
	if err := Record(ctx, rdb, "baton", "failed", at, time.Hour, Outcome{Status: jobs.StatusFailed, Reason: "exit status 1"}); err != nil {
		t.Fatal(err)
	}
	if err := Record(ctx, rdb, "baton", "missed", at, time.Hour, Outcome{Status: jobs.StatusMissed}); err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"paused", "ran", "failed", "missed", "none"} {
		if err := Forget(ctx, rdb, "baton", job, at); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(ctx, rdb, "baton", []string{"paused", "ran", "failed", "missed", "none"}, at)
	if err != nil {
		t.Fatal(err)
	}
	for _, job := range []string{"paused", "missed"} {
		if _, ok := got[job]; ok {
			t.Errorf("a %s tick's outcome was not forgotten: %+v", job, got[job])
		}
	}
	if o, ok := got["failed"]; !ok || o.Status != jobs.StatusFailed {
		t.Errorf("a failure (a racing backfill's run of the tick) was forgotten: %+v", got)
	}
	if o, ok := got["ran"]; !ok || !o.OK() {
		t.Errorf("a success was forgotten: %+v", got)
	}
	if _, ok := got["none"]; ok {
		t.Errorf("forgetting nothing wrote a record")
	}
}
