package baton_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/layout"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// layoutConfig is a one-Redis config of namespace "lay" with shards and
// lanes, and exec jobs named after jobs, each every second.
func layoutConfig(t *testing.T, addr string, shards, lanes int, jobs ...string) *config.Config {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: lay\n", addr)
	fmt.Fprintf(&b, "schedules: {shards: %d}\nworker: {lanes: %d}\njobs:\n", shards, lanes)
	for _, j := range jobs {
		fmt.Fprintf(&b, "  - name: %s\n    schedule: \"@every 1s\"\n    exec: {command: [\"true\"]}\n", j)
	}
	if len(jobs) == 0 {
		b.WriteString("  - name: idle\n    schedule: \"@yearly\"\n    exec: {command: [\"true\"]}\n")
	}
	cfg, err := config.Load([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Schedule: a namespace with runtime schedules in one shard; every replica
// stops; baton init runs with a config of 4 shards and 3 lanes. Every
// schedule moves to its shard, the new layout is recorded, a replica of
// the new config holds them all, and one of the old config refuses to
// start, naming both layouts, as does a tool's put.
func TestInitMovesSchedulesToANewLayoutAndOldConfigsRefuse(t *testing.T) {
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := layoutConfig(t, srv.Addr(), 1, 1)
	c, err := baton.NewCluster(before)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 25 {
		if _, err := c.PutSchedule(ctx, fmt.Sprintf("t/%02d", i), baton.ScheduleSpec{Schedule: "@yearly", Handler: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	after := layoutConfig(t, srv.Addr(), 4, 3)
	rep, err := baton.InitLayout(ctx, after, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 25 || !rep.Recorded || rep.From != layout.Default || rep.To != (layout.Layout{Shards: 4, Lanes: 3}) {
		t.Fatalf("InitLayout: %+v", rep)
	}
	rdb := srv.TestClient(t)
	if n, _ := rdb.Exists(ctx, "lay:{schedules}:defs", "lay:{schedules}:log", "lay:{schedules}:ver").Result(); n != 0 {
		t.Fatalf("%d keys of the one-shard layout left", n)
	}
	r := running(t, after, baton.WithReplicaID("new"))
	poll.Require(t, 20*time.Second, "the new replica to hold all 25", func() bool { return r.Schedules() == 25 })
	old, err := baton.New(before, baton.WithReplicaID("old"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	err = old.Start(ctx)
	if !errors.Is(err, layout.ErrMismatch) || !strings.Contains(err.Error(), "schedules.shards 1 and worker.lanes 1") || !strings.Contains(err.Error(), "with 4 and 3") {
		t.Fatalf("a replica of the old layout started: %v", err)
	}
	if _, err := c.PutSchedule(ctx, "t/late", baton.ScheduleSpec{Schedule: "@yearly", Handler: "h"}); !errors.Is(err, layout.ErrMismatch) {
		t.Fatalf("a put with the old layout: %v", err)
	}
	// a second init of the same layout changes nothing, even with the
	// replica running
	if rep, err := baton.InitLayout(ctx, after, nil); err != nil || rep.Recorded || rep.Moved != 0 {
		t.Fatalf("second InitLayout: %+v, %v", rep, err)
	}
	// and a change while it runs is refused, naming it
	if _, err := baton.InitLayout(ctx, layoutConfig(t, srv.Addr(), 2, 3), nil); !errors.Is(err, layout.ErrMismatch) || !strings.Contains(err.Error(), "new") {
		t.Fatalf("InitLayout with a live replica: %v", err)
	}
}

// Moving from 4 shards to 3 keeps every schedule, moves only those whose
// shard changes, and a move that is run again (as after one that stopped
// half way) finds nothing left to move.
func TestInitMovesBetweenShardCounts(t *testing.T) {
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	four := layoutConfig(t, srv.Addr(), 4, 1)
	if _, err := baton.InitLayout(ctx, four, nil); err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(four)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := map[string]bool{}
	for i := range 40 {
		id := fmt.Sprintf("m/%02d", i)
		want[id] = true
		if _, err := c.PutSchedule(ctx, id, baton.ScheduleSpec{Schedule: "@yearly", Handler: "h"}); err != nil {
			t.Fatal(err)
		}
	}
	three := layoutConfig(t, srv.Addr(), 3, 1)
	rep, err := baton.InitLayout(ctx, three, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Moved == 0 || rep.Moved >= 40 {
		t.Fatalf("moved %d of 40: want those whose shard changed", rep.Moved)
	}
	c3, err := baton.NewCluster(three)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	got, err := c3.ListSchedules(ctx, baton.ScheduleQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range got.Schedules {
		delete(want, s.ID)
	}
	if len(want) > 0 || len(got.Schedules) != 40 {
		t.Fatalf("after the move: %d listed, missing %v", len(got.Schedules), want)
	}
	if n, _ := srv.TestClient(t).Exists(ctx, "lay:{schedules.3}:defs", "lay:{schedules.3}:ver").Result(); n != 0 {
		t.Fatal("the dropped shard 3's keys are left")
	}
}

// worker.lanes spreads a queue's tasks: each job's ticks go to one lane
// (its own asynq queue, a slot of its own), the worker takes from every
// lane, and every tick runs once.
func TestLanesSpreadJobsOverQueuesAndWorkersTakeThemAll(t *testing.T) {
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	jobs := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	cfg := layoutConfig(t, srv.Addr(), 1, 3, jobs...)
	if _, err := baton.InitLayout(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
	running(t, cfg, baton.WithReplicaID("r1"))
	rdb := srv.TestClient(t)
	lanes := map[string]bool{}
	poll.Require(t, 30*time.Second, "every job to run twice", func() bool {
		for _, j := range jobs {
			q := cfg.QueueFor("default", j)
			n, _ := rdb.Exists(ctx, "asynq:{"+q+"}:completed").Result()
			if n == 0 {
				return false
			}
			lanes[q] = true
		}
		return true
	})
	if len(lanes) != 3 {
		t.Fatalf("8 jobs used lanes %v, want all 3", lanes)
	}
	for q := range lanes {
		if q != "lay:default" && !strings.HasPrefix(q, "lay:default#") {
			t.Fatalf("lane %q", q)
		}
		if back, _ := cfg.QueueOf(q); back != "default" {
			t.Fatalf("QueueOf(%q) = %q", q, back)
		}
	}
}
