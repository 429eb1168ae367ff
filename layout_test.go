package baton_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/layout"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/scheduler"
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
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := layoutConfig(t, srv.Addr(), 1, 1)
	c := layoutCluster(t, before)
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
	if !errors.Is(err, baton.ErrLayoutMismatch) || !strings.Contains(err.Error(), "schedules.shards 1 and worker.lanes 1") || !strings.Contains(err.Error(), "with 4 and 3") {
		t.Fatalf("a replica of the old layout started: %v", err)
	}
	if _, err := c.PutSchedule(ctx, "t/late", baton.ScheduleSpec{Schedule: "@yearly", Handler: "h"}); !errors.Is(err, baton.ErrLayoutMismatch) {
		t.Fatalf("a put with the old layout: %v", err)
	}
	// a second init of the same layout changes nothing, even with the
	// replica running
	if rep, err := baton.InitLayout(ctx, after, nil); err != nil || rep.Recorded || rep.Moved != 0 {
		t.Fatalf("second InitLayout: %+v, %v", rep, err)
	}
	// and a change while it runs is refused, naming it
	if _, err := baton.InitLayout(ctx, layoutConfig(t, srv.Addr(), 2, 3), nil); !errors.Is(err, baton.ErrLayoutMismatch) || !strings.Contains(err.Error(), "new") {
		t.Fatalf("InitLayout with a live replica: %v", err)
	}
}

// Moving from 4 shards to 3 keeps every schedule, moves only those whose
// shard changes, and a move that is run again (as after one that stopped
// half way) finds nothing left to move.
func TestInitMovesBetweenShardCounts(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	four := layoutConfig(t, srv.Addr(), 4, 1)
	initLayout(t, ctx, four)
	c := layoutCluster(t, four)
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
	c3 := layoutCluster(t, three)
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
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	jobs := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	cfg := layoutConfig(t, srv.Addr(), 1, 3, jobs...)
	initLayout(t, ctx, cfg)
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

// layoutCluster is a Cluster of cfg, closed when the test ends.
func layoutCluster(t *testing.T, cfg *config.Config) *baton.Cluster {
	t.Helper()
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// initLayout records cfg's layout, as baton init does.
func initLayout(t *testing.T, ctx context.Context, cfg *config.Config) {
	t.Helper()
	if _, err := baton.InitLayout(ctx, cfg, nil); err != nil {
		t.Fatal(err)
	}
}

// putMany puts n @yearly schedules h/0000.. with c.
func putMany(t *testing.T, ctx context.Context, c *baton.Cluster, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.PutSchedule(ctx, fmt.Sprintf("h/%04d", i), baton.ScheduleSpec{Schedule: "@yearly", Handler: "h"}); err != nil {
			t.Fatal(err)
		}
	}
}

// Schedule: a tool of the namespace's old config (1 shard: the HTTP API,
// baton schedules put) runs while baton init moves the schedules to 2
// shards. After the move took p/00 to its new shard, the tool puts p/00
// again, puts a new p/new and deletes p/01. Each is refused (ErrMoving),
// not reported done and then lost with the old shard's keys.
func TestWritesDuringAMoveAreRefusedNotLost(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := layoutConfig(t, srv.Addr(), 1, 1)
	c := layoutCluster(t, before)
	putMany(t, ctx, c, 5)
	after := layoutConfig(t, srv.Addr(), 2, 1)
	var errs []error
	if _, err := baton.InitLayout(ctx, after, func(int) {
		if errs != nil {
			return
		}
		_, e1 := c.PutSchedule(ctx, "h/0000", baton.ScheduleSpec{Schedule: "@daily", Handler: "h"})
		_, e2 := c.PutSchedule(ctx, "h/new", baton.ScheduleSpec{Schedule: "@daily", Handler: "h"})
		e3 := c.DeleteSchedule(ctx, "h/0001", false)
		errs = []error{e1, e2, e3}
	}); err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if !errors.Is(err, baton.ErrSchedulesMoving) {
			t.Errorf("write %d during the move: %v, want ErrMoving", i, err)
		}
	}
	nc := layoutCluster(t, after)
	page, err := nc.ListSchedules(ctx, baton.ScheduleQuery{Limit: 100})
	if err != nil || len(page.Schedules) != 5 {
		t.Fatalf("after the move: %d schedules, %v", len(page.Schedules), err)
	}
	for _, s := range page.Schedules {
		if !strings.Contains(string(s.Definition), "@yearly") {
			t.Fatalf("%s changed during the move: %s", s.ID, s.Definition)
		}
	}
}

// Schedule: baton init to 2 shards stops half way (^C, a dropped
// connection) after its first batch of 1,200 schedules. Until a move
// completes, replicas and writers refuse, naming it, so no put lands in a
// shard the move read already. The operator goes back: baton init with
// the old config (1 shard) finishes the move back, and every schedule is
// where the recorded layout reads it.
func TestInitBackToTheOldLayoutAfterAHalfMoveKeepsEverySchedule(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	before := layoutConfig(t, srv.Addr(), 1, 1)
	initLayout(t, ctx, before)
	c := layoutCluster(t, before)
	const n = 1200
	putMany(t, ctx, c, n)
	mctx, stop := context.WithCancel(ctx)
	_, err := baton.InitLayout(mctx, layoutConfig(t, srv.Addr(), 2, 1), func(int) { stop() })
	stop()
	if err == nil {
		t.Fatal("the move did not stop half way")
	}
	if _, err := c.PutSchedule(ctx, "h/0001", baton.ScheduleSpec{Schedule: "@daily", Handler: "h"}); !errors.Is(err, baton.ErrSchedulesMoving) {
		t.Fatalf("a put after the half move: %v, want ErrMoving", err)
	}
	r, err := baton.New(before)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(ctx); !errors.Is(err, baton.ErrSchedulesMoving) {
		t.Fatalf("a replica after the half move: %v, want ErrMoving", err)
	}
	rep, err := baton.InitLayout(ctx, before, nil)
	if err != nil || !rep.Recorded {
		t.Fatalf("init back: %+v, %v", rep, err)
	}
	rdb := srv.TestClient(t)
	if got, _ := rdb.HLen(ctx, "lay:{schedules}:defs").Result(); got != n {
		t.Fatalf("the recorded layout (1 shard) holds %d of %d schedules", got, n)
	}
	if k, _ := rdb.Keys(ctx, "lay:{schedules.*").Result(); len(k) > 0 {
		t.Fatalf("keys of the abandoned layout left: %v", k)
	}
	if _, err := c.PutSchedule(ctx, "h/0001", baton.ScheduleSpec{Schedule: "@daily", Handler: "h"}); err != nil {
		t.Fatalf("a put after the move back: %v", err)
	}
}

// Schedule: two baton init runs of the namespace at once, one to 2 shards
// (A), one to 4 (B), B starting while A moves. One holds the layout's lock:
// B is refused, naming it, and A's layout holds every schedule.
func TestConcurrentInitsKeepEverySchedule(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	before := layoutConfig(t, srv.Addr(), 1, 1)
	c := layoutCluster(t, before)
	const n = 1200
	putMany(t, ctx, c, n)
	two, four := layoutConfig(t, srv.Addr(), 2, 1), layoutConfig(t, srv.Addr(), 4, 1)
	var errB error
	once := false
	if _, err := baton.InitLayout(ctx, two, func(int) {
		if !once {
			once = true
			_, errB = baton.InitLayout(ctx, four, nil)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if errB == nil || !strings.Contains(errB.Error(), "another baton init") {
		t.Fatalf("the second init during the first: %v", errB)
	}
	cc := layoutCluster(t, two)
	for i := range n {
		if _, err := cc.GetSchedule(ctx, fmt.Sprintf("h/%04d", i), 0); err != nil {
			t.Fatal(err)
		}
	}
}

// Schedule: job j's tick T is dispatched with 1 lane: its task waits in
// lay:default. Every replica stops and baton init asks for 2 lanes, which
// would put j in lane 1: T dispatched again there (a lost reply, a
// retried hand-off) would not find its task and run twice. The init is
// refused while a lane holds tasks, naming it.
func TestLaneChangeWaitsForTheQueuesToDrain(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	job := ""
	for i := 0; job == ""; i++ {
		if n := fmt.Sprintf("j%d", i); config.ScheduleShard(n, 2) == 1 {
			job = n
		}
	}
	one := layoutConfig(t, srv.Addr(), 1, 1, job)
	client := asynq.NewClientFromRedisClient(srv.TestClient(t))
	tick := scheduler.Tick{Job: job, At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), RunID: "r1", Fence: 1, Replica: "a"}
	if err := handoff.New(one, client, nil, handoff.WithQueueRedis(srv.TestClient(t))).Dispatch(ctx, tick); err != nil {
		t.Fatal(err)
	}
	_, err := baton.InitLayout(ctx, layoutConfig(t, srv.Addr(), 1, 2, job), nil)
	if !errors.Is(err, baton.ErrLayoutMismatch) || !strings.Contains(err.Error(), "lay:default (1 tasks)") {
		t.Fatalf("init to 2 lanes with a task queued: %v", err)
	}
}
