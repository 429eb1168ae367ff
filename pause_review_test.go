package baton_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// Review of pause with a note and resume --catch-up (issue 14).

// Schedule (a job with jitter, so each tick is claimed a stable offset
// after it is due; a replica that starts after downtime, or a held tick
// after an outage, is claimed late the same way):
//
//  1. tick T is due; its claim is still ahead (T + the job's jitter offset).
//  2. an operator pauses the job at T + 1s: since = T + 1s.
//  3. the claim of T finds the job paused: T is recorded paused (history:
//     not_run, status paused, "the job is paused").
//  4. resume --catch-up: T is within the starting deadline and recorded
//     paused, but due before since, so catchUp (pause.go) filters it out by
//     its due time: it is neither replayed nor listed as skipped, decided
//     or failed. The tick did not run, the catch-up says nothing of it.
func TestReviewCatchUpReplaysATickDueBeforeThePauseButPausedAfter(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// a job name whose jitter offset leaves room to pause between the tick
	// and its claim
	const jitter = 8 * time.Second
	name := ""
	var offset time.Duration
	for i := range 1000 {
		n := fmt.Sprintf("jit%d", i)
		if o := scheduler.Jitter(n, jitter); o >= 4*time.Second && o <= 7*time.Second {
			name, offset = n, o
			break
		}
	}
	if name == "" {
		t.Fatal("no job name with a jitter offset in [4s, 7s]")
	}
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
worker: {shutdown_grace: 2s}
jobs:
  - name: %s
    schedule: "@every 10s"
    jitter: 8s
    starting_deadline: 1m
    concurrency: allow
    handler: {name: %s}
`, srv.Addr(), name, name))
	if err != nil {
		t.Fatal(err)
	}
	var log runLog
	reg := log.registry(t, name)
	stop := replicaRun(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID("r1"))
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	redisNow := func() time.Time {
		now, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now.UTC()
	}
	// the next tick with at least 1s to go, then 1s after it
	tick := redisNow().Add(time.Second).Truncate(10 * time.Second).Add(10 * time.Second)
	poll.Require(t, 30*time.Second, "1s after tick "+tick.Format(time.RFC3339), func() bool {
		return !redisNow().Before(tick.Add(time.Second))
	})
	if d := redisNow().Sub(tick); d >= offset-time.Second {
		t.Skipf("too late to pause before the claim (%s after the tick, claim at +%s)", d, offset)
	}
	pr, err := c.Pause(ctx, name, baton.PauseNote{By: "alice", Note: "vendor down"})
	if err != nil || !pr.InEffect || pr.Pause == nil {
		t.Fatalf("pause: %+v %v", pr, err)
	}
	poll.Require(t, 20*time.Second, "tick "+tick.Format(time.RFC3339)+" recorded paused", func() bool {
		recs, err := jobs.ReadHistory(ctx, rdb, "baton", name, 0)
		if err != nil {
			return false
		}
		return slices.ContainsFunc(recs, func(r jobs.RunRecord) bool { return r.Tick.Equal(tick) && r.Status == jobs.StatusPaused })
	})
	stop() // no more ticks
	if runs := log.of(name); slices.ContainsFunc(runs, func(r jobs.Run) bool { return r.Tick.Equal(tick) }) {
		t.Fatalf("tick %s ran though it was recorded paused", tick)
	}

	res, err := c.Resume(ctx, name, true)
	if err != nil || !res.InEffect || res.CatchUp == nil {
		t.Fatalf("resume --catch-up: %+v %v", res, err)
	}
	cu := res.CatchUp
	t.Logf("catch-up: replayed %v, decided %v, skipped %+v, failed %v", cu.Replayed, cu.Decided, cu.Skipped, cu.Failed)
	accounted := slices.ContainsFunc(cu.Replayed, tick.Equal) || slices.ContainsFunc(cu.Decided, tick.Equal) ||
		slices.ContainsFunc(cu.Failed, tick.Equal) || slices.ContainsFunc(cu.Skipped, func(s baton.SkippedTick) bool { return s.Tick.Equal(tick) })
	if !slices.ContainsFunc(cu.Replayed, tick.Equal) {
		t.Errorf("tick %s, recorded paused by this pause (paused at %s, before the tick's claim) and within the starting deadline, "+
			"was not replayed (accounted for at all: %v): catchUp filters paused ticks by due time >= since, not by when they were recorded paused",
			tick.Format(time.RFC3339), pr.Pause.At.Format(time.RFC3339Nano), accounted)
	}
}
