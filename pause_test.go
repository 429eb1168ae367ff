package baton_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/history"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// pauseConfig is a deployment on one Redis with a job of each concurrency a
// catch-up treats differently; each has a 5-minute starting deadline.
func pauseConfig(t *testing.T, addr, ns string) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: %s
jobs:
  - name: all
    schedule: "@every 1m"
    starting_deadline: 5m
    concurrency: allow
    exec: {command: ["true"]}
  - name: one
    schedule: "@every 1m"
    starting_deadline: 5m
    exec: {command: ["true"]}
  - name: kept
    schedule: "@every 1m"
    starting_deadline: 5m
    concurrency: buffer_one
    exec: {command: ["true"]}
  - name: held
    schedule: "@every 1m"
    paused: true
    exec: {command: ["true"]}
`, addr, ns)))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// pausedTicks writes what the scheduler writes for ticks it found the job
// paused at: the tick's record on the lock master and the history's
// not-run event.
func pausedTicks(t *testing.T, rdb *redis.Client, ns, job string, runs int, ticks ...time.Time) {
	t.Helper()
	// each recorded as the claim records it: just after it was due (the
	// stream entry's time is when it was recorded)
	for _, at := range ticks {
		if err := rdb.XAdd(context.Background(), &redis.XAddArgs{
			Stream: ns + ":{history:" + job + "}",
			ID:     fmt.Sprintf("%d-0", at.UnixMilli()+100),
			Values: []any{"ev", "not_run", "tick", at.UTC().Format(time.RFC3339Nano), "run", "", "status", "paused", "reason", "the job is paused"},
		}).Err(); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%s:{%s}:tick:%d", ns, job, at.UnixMilli())
		if err := rdb.Set(context.Background(), key, "paused", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// pauseCluster starts a Redis with pauseConfig's jobs in namespace ns and
// returns a Cluster on it (closed at cleanup), a context bounding the test
// and Redis's time.
func pauseCluster(t *testing.T, ns string) (*redis.Client, *config.Config, *baton.Cluster, context.Context, time.Time) {
	t.Helper()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := pauseConfig(t, srv.Addr(), ns)
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return rdb, cfg, c, ctx, now
}

// backdatePause moves the start of job's pause back to since, as if it had
// been paused then.
func backdatePause(t *testing.T, rdb *redis.Client, ns, job string, since time.Time) {
	t.Helper()
	ctx := context.Background()
	key := scheduler.PauseKey(ns, job)
	var v map[string]any
	if err := json.Unmarshal([]byte(rdb.Get(ctx, key).Val()), &v); err != nil {
		t.Fatalf("pause flag %s: %v", key, err)
	}
	v["at_ms"] = since.UnixMilli()
	b, _ := json.Marshal(v)
	if err := rdb.Set(ctx, key, b, 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// Resume with catch-up replays the ticks recorded paused since the pause
// began and due within the starting deadline, each once through the claim
// (a second catch-up finds them dispatched), and leaves older ones, and
// ticks paused before this pause, skipped. A job that cannot overlap
// replays only the newest (forbid), or the newest it can run and keep
// (buffer_one: two). Resume without catch-up replays nothing.
func TestResumeCatchUp(t *testing.T) {
	t.Parallel()
	const ns = "catchup"
	rdb, cfg, c, ctx, now := pauseCluster(t, ns)
	now = now.UTC().Truncate(time.Minute)
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	queue := cfg.QueueName("default")

	for _, job := range []string{"all", "one", "kept"} {
		if res, err := c.Pause(ctx, job, baton.PauseNote{By: "alice", Note: "vendor"}); err != nil || !res.InEffect {
			t.Fatalf("pause %s: %+v %v", job, res, err)
		}
		backdatePause(t, rdb, ns, job, ago(20))
		// 30m ago: an earlier pause's; 12m and 8m: past the deadline
		pausedTicks(t, rdb, ns, job, cfg.History.Runs, ago(30), ago(12), ago(8), ago(3), ago(2), ago(1))
	}

	res, err := c.Resume(ctx, "all", true)
	if err != nil || !res.InEffect || res.CatchUp == nil {
		t.Fatalf("resume --catch-up: %+v %v", res, err)
	}
	cu := res.CatchUp
	if want := []time.Time{ago(3), ago(2), ago(1)}; !slices.Equal(cu.Replayed, want) || len(cu.Decided) != 0 || len(cu.Failed) != 0 {
		t.Errorf("replayed %v, decided %v, failed %v (%s); want replayed %v", cu.Replayed, cu.Decided, cu.Failed, cu.Reason, want)
	}
	if len(cu.Skipped) != 2 || !cu.Skipped[0].Tick.Equal(ago(12)) || !cu.Skipped[1].Tick.Equal(ago(8)) || !strings.Contains(cu.Skipped[0].Reason, "starting deadline (5m0s)") {
		t.Errorf("skipped %+v, want the ticks of 12m and 8m ago, past the deadline (not the one before the pause)", cu.Skipped)
	}
	if ids := pendingTasks(t, rdb, queue); len(ids) != 3 {
		t.Errorf("enqueued after the catch-up: %v, want 3 tasks", ids)
	}
	// again: the claim finds them dispatched
	res, err = c.Resume(ctx, "all", true)
	if err != nil || res.CatchUp == nil || len(res.CatchUp.Replayed) != 0 || len(res.CatchUp.Decided) != 3 {
		t.Errorf("second resume --catch-up: %+v %v, want nothing replayed and 3 decided", res.CatchUp, err)
	}
	if ids := pendingTasks(t, rdb, queue); len(ids) != 3 {
		t.Errorf("enqueued after the second catch-up: %v, want still 3 tasks", ids)
	}

	// forbid: only the newest paused tick within the deadline
	res, err = c.Resume(ctx, "one", true)
	if err != nil || res.CatchUp == nil || !slices.Equal(res.CatchUp.Replayed, []time.Time{ago(1)}) {
		t.Fatalf("resume --catch-up of a forbid job: %+v %v, want %s replayed", res.CatchUp, err, ago(1))
	}
	var why []string
	for _, s := range res.CatchUp.Skipped {
		why = append(why, s.Tick.Sub(now).String()+" "+s.Reason)
	}
	if len(why) != 4 || !strings.Contains(why[2], "-3m0s concurrency forbid: only the newest") {
		t.Errorf("skipped: %q", why)
	}
	if ids := pendingTasks(t, rdb, queue); len(ids) != 4 {
		t.Errorf("enqueued: %v, want 4 tasks", ids)
	}

	// buffer_one: the newest two, one to run and one to keep
	res, err = c.Resume(ctx, "kept", true)
	if err != nil || res.CatchUp == nil || !slices.Equal(res.CatchUp.Replayed, []time.Time{ago(2), ago(1)}) {
		t.Fatalf("resume --catch-up of a buffer_one job: %+v %v, want %s and %s replayed", res.CatchUp, err, ago(2), ago(1))
	}
	if s := res.CatchUp.Skipped; len(s) != 3 || !s[2].Tick.Equal(ago(3)) || !strings.Contains(s[2].Reason, "only the newest 2 paused ticks are replayed (one runs, 1 kept)") {
		t.Errorf("skipped: %+v", s)
	}
	if ids := pendingTasks(t, rdb, queue); len(ids) != 6 {
		t.Errorf("enqueued: %v, want 6 tasks", ids)
	}

	// a job the config pauses has nothing to catch up
	if _, err := c.Resume(ctx, "held", true); !errors.Is(err, baton.ErrBadPause) || !strings.Contains(err.Error(), "paused by the config") {
		t.Errorf("catch-up of a job the config pauses: %v", err)
	}
}

// Resume without catch-up (--skip) leaves the ticks recorded paused
// skipped: nothing is dispatched, their records stay.
func TestResumeSkip(t *testing.T) {
	t.Parallel()
	const ns = "skip"
	rdb, cfg, c, ctx, now := pauseCluster(t, ns)
	tick := now.UTC().Truncate(time.Minute).Add(-time.Minute)
	if _, err := c.Pause(ctx, "all", baton.PauseNote{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	backdatePause(t, rdb, ns, "all", tick.Add(-time.Minute))
	pausedTicks(t, rdb, ns, "all", cfg.History.Runs, tick)
	res, err := c.Resume(ctx, "all", false)
	if err != nil || !res.InEffect || res.CatchUp != nil {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if ids := pendingTasks(t, rdb, cfg.QueueName("default")); len(ids) != 0 {
		t.Errorf("resume without catch-up enqueued %v", ids)
	}
	if v := rdb.Get(ctx, fmt.Sprintf("%s:{all}:tick:%d", ns, tick.UnixMilli())).Val(); v != "paused" {
		t.Errorf("the paused tick's record after the resume: %q", v)
	}
	if n := rdb.Exists(ctx, scheduler.PauseKey(ns, "all")).Val(); n != 0 {
		t.Error("the pause flag stays")
	}
}

// With three lock masters, the status shows the note of the newest pause
// (a master that missed it keeps the older note) and since when from the
// oldest; a majority with the flag decides that the job is paused.
func TestPauseNoteAcrossMasters(t *testing.T) {
	t.Parallel()
	servers := redistest.NewN(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, fmt.Sprintf("%q", "redis://"+s.Addr()+"/0"))
	}
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking:
  fresh_deployment: true
  masters: [%s]
namespace: notes
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, servers[0].Addr(), strings.Join(urls, ", "))))
	if err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := c.Pause(ctx, "a", baton.PauseNote{By: "alice", Note: "first"})
	if err != nil || first.Written != 3 {
		t.Fatalf("pause: %+v %v", first, err)
	}
	key := scheduler.PauseKey("notes", "a")
	last := servers[2].TestClient(t)
	old := last.Get(ctx, key).Val()
	second, err := c.Pause(ctx, "a", baton.PauseNote{By: "bob", Note: "second"})
	if err != nil || second.Written != 3 || !second.Pause.At.Equal(first.Pause.At) {
		t.Fatalf("pause again: %+v %v, want since %s kept", second, err, first.Pause.At)
	}
	// the last master missed the second pause: it has the first note
	if err := last.Set(ctx, key, old, 0).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if js := st.Jobs[0]; !js.Paused || js.PausedBy != "bob" || js.PauseNote != "second" || !js.PausedSince.Equal(first.Pause.At) {
		t.Errorf("status: %+v, want bob's note, since %s", js, first.Pause.At)
	}
	// a resume that reached one master only: still paused by the majority
	if err := servers[0].TestClient(t).Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Status(ctx); err != nil || !st.Jobs[0].Paused || st.Jobs[0].PauseNote != "second" {
		t.Errorf("status with the flag on 2 of 3 masters: %+v %v", st.Jobs[0], err)
	}
}

// A pause flag's value carries its format version; lua/pause.lua adds at_ms
// and set_ms to the object and keeps the rest.
func TestPauseFlagCarriesFormatVersion(t *testing.T) {
	t.Parallel()
	b, err := baton.PauseValue(baton.PauseNote{By: "ops", Note: "vendor fix"})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"v":1,"by":"ops","note":"vendor fix"}`; string(b) != want {
		t.Fatalf("value %s, want %s", b, want)
	}
}

// A pause flag whose value is no pause record (not JSON, or since when not
// an exact integer) still pauses the job (the claim pauses on the flag's
// presence), and status says so with an error naming the key and the
// master, never a note read as empty or a since-when from nonsense; a new
// pause rewrites it, with since when from this pause.
func TestCorruptPauseRecordIsReported(t *testing.T) {
	t.Parallel()
	servers := redistest.NewN(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, fmt.Sprintf("%q", "redis://"+s.Addr()+"/0"))
	}
	cfg, err := config.Load([]byte(fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking:
  fresh_deployment: true
  masters: [%s]
namespace: notes
jobs:
  - name: a
    schedule: "@every 1m"
    max_runs: 3
    exec: {command: ["true"]}
`, servers[0].Addr(), strings.Join(urls, ", "))))
	if err != nil {
		t.Fatal(err)
	}
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := scheduler.PauseKey("notes", "a")
	for _, v := range []string{"abc", `{"by":"x","at_ms":9223372036854775807}`, `{"by":"x","at_ms":1.5}`, `{"by":"x"}`} {
		for _, s := range servers {
			if err := s.TestClient(t).Set(ctx, key, v, 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		st, err := c.Status(ctx)
		var ce *jobs.CorruptError
		if !errors.Is(err, jobs.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != key || !strings.Contains(ce.Field, "lock master") {
			t.Fatalf("status with pause record %q = %v, want ErrCorrupt naming %q and the master", v, err, key)
		}
		if !st.Jobs[0].Paused {
			t.Fatalf("status with pause record %q: not paused (the claims pause on it)", v)
		}
		res, err := c.Pause(ctx, "a", baton.PauseNote{By: "bob", Note: "again"})
		if err != nil || res.Written != 3 || res.Pause == nil || time.Since(res.Pause.At) > time.Minute || res.Pause.At.After(time.Now().Add(time.Minute)) {
			t.Fatalf("pause over record %q: %+v %v, want since now", v, res, err)
		}
		if st, err := c.Status(ctx); err != nil || st.Jobs[0].PauseNote != "again" {
			t.Fatalf("status after the pause rewrote %q: %+v %v", v, st.Jobs[0], err)
		}
	}
	// the job's run count toward max_runs, read by status
	count := handoff.RunCountKeys("notes", "a")[0]
	if err := servers[0].TestClient(t).Set(ctx, count, "-5", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(ctx)
	var ce *jobs.CorruptError
	if !errors.Is(err, jobs.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != count {
		t.Fatalf("status with run count -5 = %v, want ErrCorrupt naming %q", err, count)
	}
}

// A pause flag of a newer format than this release reads (a later
// release paused the job) keeps the job paused: status says paused, reads
// no who, why or since when from it, and says to upgrade this replica
// (a *formats.NewerError); a catch-up, which needs since when, is refused.
// It is never read as unpaused or as this release's note.
func TestPauseFlagOfANewerFormatKeepsTheJobPaused(t *testing.T) {
	t.Parallel()
	rdb, _, c, ctx, _ := pauseCluster(t, "newer")
	// its members may mean something else: "by" a number, "at_ms" a string
	v := fmt.Sprintf(`{"v":%d,"by":7,"note":"a later note","at_ms":"soon","set_ms":1}`, formats.PauseFlag+1)
	if err := rdb.Set(ctx, scheduler.PauseKey("newer", "one"), v, 0).Err(); err != nil {
		t.Fatal(err)
	}
	st, err := c.Status(ctx)
	var ne *formats.NewerError
	if !errors.As(err, &ne) || ne.Format != "pause flag" || ne.Met != formats.PauseFlag+1 || errors.Is(err, jobs.ErrCorrupt) {
		t.Fatalf("status with a newer pause flag: %v, want a NewerError of the pause flag", err)
	}
	if j := st.Jobs[slices.IndexFunc(st.Jobs, func(j baton.JobStatus) bool { return j.Name == "one" })]; !j.Paused || j.PauseNote != "" || j.PausedBy != "baton pause" || !j.PausedSince.IsZero() {
		t.Fatalf("status with a newer pause flag: %+v, want paused, with no note read", j)
	}
	if _, err := c.Resume(ctx, "one", true); !errors.As(err, &ne) {
		t.Fatalf("resume --catch-up over a newer pause flag: %v, want refused (since when is not read)", err)
	}
	if n, _ := rdb.Exists(ctx, scheduler.PauseKey("newer", "one")).Result(); n != 1 {
		t.Fatal("the refused catch-up deleted the flag")
	}
	// pausing it again would write it as this release's format, losing
	// what the newer one said: the flag is left as it is, and why is told
	res, err := c.Pause(ctx, "one", baton.PauseNote{By: "ops", Note: "again"})
	if err != nil || res.Written != 0 || res.InEffect || len(res.Failures) != 1 || !strings.Contains(res.Failures[0], "newer than this replica writes") {
		t.Fatalf("pause over a newer flag: %+v, %v", res, err)
	}
	if got, _ := rdb.Get(ctx, scheduler.PauseKey("newer", "one")).Result(); got != v {
		t.Fatalf("the newer flag was rewritten: %s", got)
	}
}

// resume --catch-up for buffering jobs (newest 1+bound paused ticks
// replayed): schedules that try to dispatch a tick twice, or more ticks
// than the job runs and keeps.

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
func TestCatchUpRerunDoesNotReplaySkippedTicks(t *testing.T) {
	t.Parallel()
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
func TestCatchUpRacingResumesDispatchOnce(t *testing.T) {
	t.Parallel()
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
func TestCatchUpReplaysATickDueBeforeThePauseButPausedAfter(t *testing.T) {
	t.Parallel()
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
		recs, err := history.Read(ctx, rdb, "baton", name, 0)
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

// A pause with an end ends by itself: each lock master drops the flag at
// the end by its own clock, status shows the end while the pause lasts,
// the ticks due before it are recorded paused (who paused, until when and
// why in each record) and those after run again, without a resume. Pausing again without an end makes the pause last.
func TestAPauseWithAnEndEndsByItself(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg, c := everySecond(t, srv, "until")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	end := now.Add(3 * time.Second).Truncate(time.Second).Add(500 * time.Millisecond)
	res, err := c.Pause(ctx, "tick", baton.PauseNote{By: "alice", Note: "freeze", Until: end})
	if err != nil || !res.InEffect || res.Pause == nil || !res.Pause.Until.Equal(end) {
		t.Fatalf("pause until %s: %+v %v", end, res, err)
	}
	key := scheduler.PauseKey("until", "tick")
	if at := rdb.PExpireTime(ctx, key).Val(); at != time.Duration(end.UnixMilli())*time.Millisecond {
		t.Errorf("the flag expires at %v (unix ms), want the pause's end %d", at.Milliseconds(), end.UnixMilli())
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j := st.Jobs[0]; !j.Paused || !j.PausedUntil.Equal(end) || j.PausedBy != "alice" {
		t.Errorf("status while paused: paused %v by %q until %s, want until %s", j.Paused, j.PausedBy, j.PausedUntil, end)
	}
	running(t, cfg)
	poll.Require(t, 30*time.Second, "ticks after the end run again, without a resume", func() bool {
		recs, _ := c.History(ctx, "tick", 0)
		for _, r := range recs {
			if r.Status == jobs.StatusOK && r.Tick.After(end) {
				return true
			}
		}
		return false
	})
	recs, err := c.History(ctx, "tick", 0)
	if err != nil {
		t.Fatal(err)
	}
	paused := 0
	for _, r := range recs {
		switch {
		case r.Status == jobs.StatusPaused && r.Tick.After(end):
			t.Errorf("tick %s, after the pause's end, recorded paused", r.Tick)
		case r.Status == jobs.StatusPaused:
			paused++
			// the history records the pause and its end with each tick
			if want := "the job is paused by alice until " + end.UTC().Format(time.RFC3339Nano) + " (the pause ends by itself): freeze"; r.Reason != want {
				t.Errorf("tick %s recorded paused saying %q, want %q", r.Tick, r.Reason, want)
			}
		case r.Status == jobs.StatusOK && r.Tick.Before(end) && r.Tick.After(now.Add(time.Second)):
			t.Errorf("tick %s, within the pause, ran", r.Tick)
		}
	}
	if paused == 0 {
		t.Errorf("no tick recorded paused before the end: %+v", recs)
	}
	if st, _ := c.Status(ctx); st.Jobs[0].Paused {
		t.Errorf("status after the end: still paused")
	}

	// an end that has passed is refused; a pause without an end lasts
	if _, err := c.Pause(ctx, "tick", baton.PauseNote{By: "alice", Until: now}); !errors.Is(err, baton.ErrBadPause) {
		t.Errorf("a pause ending in the past = %v, want ErrBadPause", err)
	}
	if _, err := c.Pause(ctx, "tick", baton.PauseNote{By: "bob", Until: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(ctx, "tick", baton.PauseNote{By: "bob"}); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
		t.Errorf("pausing again without an end left a ttl of %s on the flag, want none", ttl)
	}
}
