package baton_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
)

// Review of resume --catch-up for buffering jobs (newest 1+bound paused
// ticks replayed): schedules that dispatch a tick twice, or more ticks than
// the job runs and keeps.

// ranTicks writes what a worker writes for runs of ticks of job: a started
// and a finished (ok) event each.
func ranTicks(t *testing.T, rdb *redis.Client, ns, job string, ticks ...time.Time) {
	t.Helper()
	for _, at := range ticks {
		run := fmt.Sprintf("run-%d", at.UnixMilli())
		for _, ev := range []string{"started", "finished"} {
			if err := rdb.XAdd(context.Background(), &redis.XAddArgs{
				Stream: ns + ":{history:" + job + "}",
				Values: []any{"ev", ev, "tick", at.UTC().Format(time.RFC3339Nano), "run", run, "replica", "w", "attempt", 1, "status", "ok"},
			}).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Schedule (buffer_one, starting_deadline 5m): paused ticks 4m, 3m, 2m and
// 1m ago. resume --catch-up replays the newest two (2m, 1m) and reports 4m
// and 3m skipped ("only the newest 2 paused ticks are replayed"). The two
// run (a worker records them). resume --catch-up again, as the docs allow
// ("each is dispatched at most once, also when the command runs twice ...
// the second finds them dispatched and says so"): the pause is gone, the
// two replayed ticks count as ran (Decided), and the cut to the newest two
// is applied to what is left: 4m and 3m, which the first resume skipped,
// are dispatched now. No tick is dispatched twice, but a rerun (or a
// resume racing one whose replays already started) replays up to another
// 1+bound ticks each time, four for buffer_one here. (The cut is
// computed after the ticks already dispatched are taken out; forbid and
// replace did the same with one tick before the change.) Fixed: the cut
// counts the ticks dispatched already.
func TestReviewCatchUpRerunReplaysSkippedTicks(t *testing.T) {
	const ns = "rerun"
	rdb, cfg, c, ctx, now := pauseCluster(t, ns)
	now = now.UTC().Truncate(time.Minute)
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	queue := cfg.QueueName("default")

	if res, err := c.Pause(ctx, "kept", baton.PauseNote{By: "alice"}); err != nil || !res.InEffect {
		t.Fatalf("pause: %+v %v", res, err)
	}
	backdatePause(t, rdb, ns, "kept", ago(10))
	pausedTicks(t, rdb, ns, "kept", cfg.History.Runs, ago(4), ago(3), ago(2), ago(1))

	res, err := c.Resume(ctx, "kept", true)
	if err != nil || res.CatchUp == nil || !slices.Equal(res.CatchUp.Replayed, []time.Time{ago(2), ago(1)}) {
		t.Fatalf("resume --catch-up: %+v %v", res.CatchUp, err)
	}
	if s := res.CatchUp.Skipped; len(s) != 2 {
		t.Fatalf("skipped %+v, want 4m and 3m ago", s)
	}
	ranTicks(t, rdb, ns, "kept", ago(2), ago(1)) // the worker ran them

	res, err = c.Resume(ctx, "kept", true)
	if err != nil || res.CatchUp == nil {
		t.Fatalf("second resume --catch-up: %+v %v", res, err)
	}
	if cu := res.CatchUp; len(cu.Replayed) != 0 {
		t.Errorf("second resume --catch-up replayed %v (decided %v): ticks the first one reported skipped "+
			"(only the newest 2 are replayed) are dispatched by a rerun", cu.Replayed, cu.Decided)
	}
	if ids := pendingTasks(t, rdb, queue); len(ids) != 2 {
		t.Errorf("enqueued after two catch-ups: %v, want the 2 of the first", ids)
	}
}

// Schedule (buffer_one; holds): two resume --catch-up of the same pause
// race, before any replayed tick ran. Each paused tick within the deadline
// is dispatched at most once, and together they dispatch only the newest
// two.
func TestReviewCatchUpRacingResumesDispatchOnce(t *testing.T) {
	const ns = "race"
	rdb, cfg, c, ctx, now := pauseCluster(t, ns)
	now = now.UTC().Truncate(time.Minute)
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }

	if res, err := c.Pause(ctx, "kept", baton.PauseNote{By: "alice"}); err != nil || !res.InEffect {
		t.Fatalf("pause: %+v %v", res, err)
	}
	backdatePause(t, rdb, ns, "kept", ago(10))
	pausedTicks(t, rdb, ns, "kept", cfg.History.Runs, ago(4), ago(3), ago(2), ago(1))

	var wg sync.WaitGroup
	results := make([]baton.ResumeResult, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = c.Resume(ctx, "kept", true) })
	}
	wg.Wait()
	var replayed []time.Time
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("resume %d: %v", i, errs[i])
		}
		if r.CatchUp != nil {
			replayed = append(replayed, r.CatchUp.Replayed...)
		}
	}
	slices.SortFunc(replayed, time.Time.Compare)
	if !slices.Equal(replayed, []time.Time{ago(2), ago(1)}) {
		t.Errorf("racing resumes replayed %v, want %s and %s once each", replayed, ago(2), ago(1))
	}
	if ids := pendingTasks(t, rdb, cfg.QueueName("default")); len(ids) != 2 {
		t.Errorf("enqueued: %v, want 2", ids)
	}
}
