package baton_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// everySecond is a config of one job, tick, run every second (runs may
// overlap) in namespace ns on srv, and a Cluster of it.
func everySecond(t *testing.T, srv *redistest.Server, ns string) (*config.Config, *baton.Cluster) {
	t.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: %s
jobs:
  - name: tick
    schedule: "@every 1s"
    concurrency: allow
    exec: {command: ["true"]}
`, srv.Addr(), ns)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, openCluster(t, cfg)
}

// Skipped ticks run nowhere, the ticks around them run as ever, and the
// history and the ledger say each was skipped, by whom and why: a skip
// written before the ticks are due is what every replica's claim finds.
func TestSkippedTicksRunNowhereAndSayWhoSkippedThem(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	cfg, c := everySecond(t, redistest.New(t), "skip")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.Skip(ctx, "tick", baton.SkipRequest{By: "alice", Note: "maintenance", Next: 3})
	if err != nil || len(res.Skipped) != 3 || len(res.Refused) != 0 {
		t.Fatalf("skip the next 3: %+v %v", res, err)
	}
	last := res.Skipped[2]
	for i := range 3 {
		running(t, cfg, baton.WithReplicaID(fmt.Sprintf("r%d", i)))
	}
	poll.Require(t, 30*time.Second, "a tick after the skipped ones runs", func() bool {
		recs, _ := c.History(ctx, "tick", 0)
		for _, r := range recs {
			if r.Status == jobs.StatusOK && r.Tick.After(last.Add(time.Second)) {
				return true
			}
		}
		return false
	})
	recs, err := c.History(ctx, "tick", 0)
	if err != nil {
		t.Fatal(err)
	}
	byTick := map[time.Time]jobs.RunRecord{}
	for _, r := range recs {
		if prev, dup := byTick[r.Tick.UTC()]; dup && !r.Manual {
			t.Errorf("tick %s has two records: %+v and %+v", r.Tick, prev, r)
		}
		byTick[r.Tick.UTC()] = r
	}
	for _, s := range res.Skipped {
		r, ok := byTick[s]
		if !ok || r.Status != jobs.StatusSkipped || r.Reason != "skipped by alice: maintenance" {
			t.Errorf("skipped tick %s: %+v, want skipped by alice: maintenance", s, r)
		}
	}
	if r := byTick[last.Add(time.Second)]; r.Status != jobs.StatusOK {
		t.Errorf("the tick after the skipped ones: %+v, want ok", r)
	}
	ledger, err := c.Ticks(ctx, "tick", res.Skipped[0].Add(-time.Second), last)
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range ledger.Ticks {
		skipped := !lt.Tick.Before(res.Skipped[0])
		if skipped && (lt.Outcome != baton.OutcomeSkipped || !strings.Contains(lt.Reason, "alice")) {
			t.Errorf("ledger tick %s: %s %q, want skipped by alice", lt.Tick, lt.Outcome, lt.Reason)
		}
	}
}

// A tick a claim holds already is not skipped, but said so; a time that
// is no tick of the job, or a tick due already, is refused; the request
// names the ticks one way.
func TestSkipRefusesWhatItCannotSkip(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: skipno
jobs:
  - name: hourly
    schedule: "0 * * * *"
    exec: {command: ["true"]}
  - name: pump
    mode: singleton
    exec: {command: ["true"]}
`, srv.Addr())))
	if err != nil {
		t.Fatal(err)
	}
	c := openCluster(t, cfg)
	ctx := context.Background()
	rdb := srv.TestClient(t)
	now := time.Now().UTC()
	next := now.Truncate(time.Hour).Add(time.Hour)
	if next.Sub(now) < time.Minute {
		next = next.Add(time.Hour)
	}
	// a replica's claim took the tick already (it holds its lease)
	if err := rdb.Set(ctx, scheduler.TickKey("skipno", "hourly", next), "0123456789abcdef0123456789abcdef", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := c.Skip(ctx, "hourly", baton.SkipRequest{By: "bob", Ticks: []time.Time{next, next.Add(time.Hour)}})
	if err != nil || len(res.Skipped) != 1 || !res.Skipped[0].Equal(next.Add(time.Hour)) || len(res.Refused) != 1 || !strings.Contains(res.Refused[0].Reason, "claimed already") {
		t.Errorf("skip of a claimed tick and a free one: %+v %v", res, err)
	}
	for _, tc := range []struct {
		r    baton.SkipRequest
		want string
	}{
		{baton.SkipRequest{By: "bob", Ticks: []time.Time{next.Add(time.Minute)}}, "is not a tick of job"},
		{baton.SkipRequest{By: "bob", Ticks: []time.Time{next.Add(-time.Hour)}}, "due already"},
		{baton.SkipRequest{By: "bob", Next: 1, Ticks: []time.Time{next}}, "not both"},
		{baton.SkipRequest{By: "bob"}, "name the ticks"},
		{baton.SkipRequest{By: "bob", Next: 101}, "1 to 100"},
		{baton.SkipRequest{Next: 1}, "say who"},
	} {
		if _, err := c.Skip(ctx, "hourly", tc.r); !errors.Is(err, baton.ErrBadPause) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("skip %+v = %v, want ErrBadPause saying %q", tc.r, err, tc.want)
		}
	}
	if _, err := c.Skip(ctx, "pump", baton.SkipRequest{By: "bob", Next: 1}); !errors.Is(err, baton.ErrNotTriggerable) {
		t.Errorf("skip of a singleton = %v", err)
	}
}

// The tick ledger lists the ticks a job's calendars leave out as
// excluded, with the calendar, beside the ticks it has.
func TestTheLedgerShowsTicksExcludedByACalendar(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	today := time.Now().UTC()
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: lex
calendars:
  today: {dates: [%s]}
jobs:
  - name: daily
    schedule: "0 0 * * *"
    exclude: [today]
    exec: {command: ["true"]}
`, srv.Addr(), today.Format(time.DateOnly)))
	if err != nil {
		t.Fatal(err)
	}
	c := openCluster(t, cfg)
	midnight := today.Truncate(24 * time.Hour)
	l, err := c.Ticks(context.Background(), "daily", midnight.Add(-48*time.Hour), midnight.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, lt := range l.Ticks {
		got = append(got, lt.Tick.Format("01-02")+" "+string(lt.Outcome)+" "+lt.Reason)
	}
	want := midnight.Format("01-02") + " excluded excluded: today"
	if len(got) != 3 || got[2] != want {
		t.Errorf("ledger %q, want 3 ticks, the last %q", got, want)
	}
}

// A skipped tick stays skipped once the history has trimmed the record of
// its skip (a runtime schedule keeps 3 by default; the skip is written
// before the tick is due, so the runs in between push it out): a resume
// with catch-up of a pause around it does not replay it.
func TestASkippedTickIsNotReplayedByACatchUpOnceItsSkipRecordIsTrimmed(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "")
	c := openCluster(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counter := newRunCounter()
	reg := jobs.NewRegistry()
	reg.Register("report", jobs.HandlerFunc(counter.handler))
	running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r0"))
	if _, err := c.PutSchedule(ctx, "report/a", baton.ScheduleSpec{Schedule: "@every 1s", Handler: "report", Concurrency: config.ConcurrencyAllow}); err != nil {
		t.Fatal(err)
	}
	tick := time.Now().Add(8 * time.Second).Truncate(time.Second)
	res, err := c.Skip(ctx, "@report/a", baton.SkipRequest{By: "alice", Note: "tenant maintenance", Ticks: []time.Time{tick}})
	if err != nil || len(res.Skipped) != 1 {
		t.Fatalf("skip %s: %+v %v", tick, res, err)
	}
	// paused around the skipped tick, resumed with catch-up after it (real
	// time: the replica's ticks come by the wall clock)
	time.Sleep(time.Until(tick.Add(-1500 * time.Millisecond)))
	if _, err := c.PauseSchedule(ctx, "report/a", baton.PauseNote{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(tick.Add(1500 * time.Millisecond)))
	rr, err := c.ResumeSchedule(ctx, "report/a", true)
	if err != nil || rr.CatchUp == nil {
		t.Fatalf("resume with catch-up: %+v %v", rr, err)
	}
	if slices.ContainsFunc(rr.CatchUp.Replayed, tick.Equal) {
		t.Errorf("the catch-up replayed %s, a tick skipped by alice (replayed %v)", tick.UTC().Format(time.RFC3339), rr.CatchUp.Replayed)
	}
	if !slices.ContainsFunc(rr.CatchUp.Skipped, func(s baton.SkippedTick) bool {
		return s.Tick.Equal(tick) && s.Reason == "skipped by alice: tenant maintenance"
	}) {
		t.Errorf("the catch-up does not say it left %s skipped by alice: %+v", tick.UTC().Format(time.RFC3339), rr.CatchUp.Skipped)
	}
	poll.Require(t, 10*time.Second, "a tick after the resume runs", func() bool {
		counter.mu.Lock()
		defer counter.mu.Unlock()
		return counter.byTick["@report/a "+tick.Add(3*time.Second).UTC().Format(time.RFC3339)] > 0
	})
	counter.mu.Lock()
	n := counter.byTick["@report/a "+tick.UTC().Format(time.RFC3339)]
	counter.mu.Unlock()
	if n != 0 {
		t.Errorf("the skipped tick %s ran %d times", tick.UTC().Format(time.RFC3339), n)
	}
}
