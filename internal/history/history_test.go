package history

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// The history keeps about history.runs runs per job, the newest.
func TestHistoryIsBounded(t *testing.T) {
	e := worktest.NewEnv(t)
	cfg := e.Config(t, `  - name: tiny
    schedule: "@every 1m"
    handler: {name: tiny}
`)
	cfg.History.Runs = 5
	h := runlog.NewWriter(cfg, e.RDB, worktest.Logger(t))
	for i := range 400 {
		tk := worktest.TickOf("tiny", 0)
		tk.At = tk.At.Add(time.Duration(i) * time.Minute)
		tk.RunID = fmt.Sprintf("r%d", i)
		h.Dispatched(context.Background(), tk)
	}
	n, err := e.RDB.XLen(context.Background(), runlog.Key("baton", "tiny")).Result()
	if err != nil {
		t.Fatal(err)
	}
	// approximate trimming keeps at least runs x eventsPerRun, and frees
	// whole nodes of 100 entries
	if n < 15 || n > 150 {
		t.Errorf("%d entries kept, want about %d", n, 5*runlog.EventsPerRun)
	}
	recs, err := Read(context.Background(), e.RDB, "baton", "tiny", 3)
	if err != nil || len(recs) != 3 || recs[0].RunID != "r399" {
		t.Fatalf("newest 3: %+v, %v", recs, err)
	}
	if ttl := e.RDB.PTTL(context.Background(), runlog.Key("baton", "tiny")).Val(); ttl <= 0 || ttl > cfg.History.MaxAge {
		t.Errorf("history key ttl %v, want at most max_age %v", ttl, cfg.History.MaxAge)
	}
}

// The failure streak counts the failed runs since the newest success,
// passing over ticks that did not run and runs under way or skipped.
// A history entry whose tick or numbers do not parse is reported, naming
// the stream's key and the entry, never read as tick zero, fence 0 or
// attempt 0: a tick that ran must not look as if it had not (backfills and
// catch-ups decide on the history). The records that do parse still come.
func TestCorruptHistoryEntryIsReported(t *testing.T) {
	e := worktest.NewEnv(t)
	ctx := context.Background()
	key := runlog.Key("baton", "h")
	tick := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339Nano)
	add := func(fields ...any) string {
		t.Helper()
		id, err := e.RDB.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: fields}).Result()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	add("ev", runlog.EvNotRun, "tick", tick, "status", string(jobs.StatusMissed), "reason", "late")
	for _, tc := range []struct {
		field  string
		fields []any
	}{
		{"tick", []any{"ev", runlog.EvStarted, "tick", "yesterday", "run", "r1", "attempt", "1", "fence", "5"}},
		{"fence", []any{"ev", runlog.EvStarted, "tick", tick, "run", "r2", "attempt", "1", "fence", "9223372036854775808"}},
		{"attempt", []any{"ev", runlog.EvFinished, "tick", tick, "run", "r3", "attempt", "1.5", "status", string(jobs.StatusOK)}},
		{"exit_code", []any{"ev", runlog.EvFinished, "tick", tick, "run", "r4", "exit_code", "abc", "status", string(jobs.StatusFailed)}},
	} {
		id := add(tc.fields...)
		recs, err := Read(ctx, e.RDB, "baton", "h", 0)
		var ce *jobs.CorruptError
		if !errors.Is(err, jobs.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != key || !strings.Contains(ce.Field, id) || !strings.Contains(ce.Field, tc.field) {
			t.Fatalf("history with a bad %s (entry %s) = %v, want jobs.ErrCorrupt naming %q, the entry and the field", tc.field, id, err, key)
		}
		if len(recs) != 1 || recs[0].Status != jobs.StatusMissed {
			t.Fatalf("records beside the bad %s = %+v, want the missed tick alone", tc.field, recs)
		}
		if err := e.RDB.XDel(ctx, key, id).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Read(ctx, e.RDB, "baton", "h", 0); err != nil {
		t.Fatalf("history after the bad entries were deleted: %v", err)
	}
}

// History events of a newer format than this release reads (a later
// release wrote them; their fields may mean something else) are left out
// and reported as a *formats.NewerError naming the stream, never folded
// as this release's, nor taken for corrupt: the reader says to upgrade.
// So a backfill or catch-up, which refuses a history it cannot read whole,
// never takes a tick they say ran for one that did not. A runtime
// schedule's list element that says its version is read so too.
func TestHistoryEventOfANewerFormatIsLeftOutAndReported(t *testing.T) {
	e := worktest.NewEnv(t)
	ctx := context.Background()
	tick := time.Now().UTC().Truncate(time.Second)
	newer := strconv.Itoa(formats.HistoryEvent + 1)
	key := runlog.Key("baton", "h")
	e.RDB.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"v", "1", "ev", runlog.EvNotRun, "tick", tick.Add(-time.Minute).Format(time.RFC3339Nano), "status", string(jobs.StatusMissed), "reason", "late"}})
	// "fence" a word, "status" one this release does not know
	e.RDB.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"v", newer, "ev", runlog.EvFinished, "tick", tick.Format(time.RFC3339Nano), "run", "r1", "fence", "high", "status", "done"}})
	list := runlog.ListKey("baton", "@s")
	e.RDB.RPush(ctx, list, fmt.Sprintf(`%d-0 ["v","%s","t","%d","R","r1","s","done"]`, tick.UnixMilli(), newer, tick.UnixMilli()))
	for _, tc := range []struct{ job, key string }{{"h", key}, {"@s", runlog.Key("baton", "@s")}} {
		recs, err := Read(ctx, e.RDB, "baton", tc.job, 0)
		var ne *formats.NewerError
		if !errors.As(err, &ne) || ne.Format != "history event" || errors.Is(err, jobs.ErrCorrupt) || !strings.Contains(err.Error(), tc.key) ||
			!strings.Contains(err.Error(), "upgrade this replica") {
			t.Fatalf("%s: history with a newer event: %v, want a NewerError naming %s", tc.job, err, tc.key)
		}
		for _, r := range recs {
			if r.Tick.Equal(tick) {
				t.Fatalf("%s: the newer event was folded: %+v", tc.job, r)
			}
		}
	}
}

// History fold, schedule: a manual trigger's "dispatched" event is written
// by the dispatcher after the enqueue returns, so a fast worker's started
// and finished events can land first. The record must still end "ok".
func TestHistoryDispatchedAfterFinished(t *testing.T) {
	e := worktest.NewEnv(t)
	cfg := e.Config(t, `  - name: m
    schedule: "@every 1m"
    concurrency: allow
    exec: {command: ["true"]}
`)
	h := runlog.NewWriter(cfg, e.RDB, worktest.Logger(t))
	tk := worktest.TickOf("m", 1)
	tk.Manual = true
	run := jobs.Run{Job: "m", Tick: tk.At, RunID: tk.RunID, Attempt: 1, Fence: 9, Replica: "w1"}
	job, _ := cfg.Job("m")
	ctx := context.Background()
	h.Started(ctx, tk, run.Replica, run.Attempt, run.Fence)
	code := 0
	h.Finished(ctx, tk, job, runlog.End{Replica: run.Replica, Attempt: run.Attempt, Fence: run.Fence, Status: string(jobs.StatusOK), ExitCode: &code})
	h.Dispatched(ctx, tk)
	recs, err := Read(ctx, e.RDB, cfg.Namespace, "m", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != jobs.StatusOK || !recs[0].Manual {
		t.Errorf("records: %+v", recs)
	}
}

// History fold, schedule: attempt 1 fails, attempt 2 starts, its worker
// dies (no finished event). The record says "running", attempt 2, with the
// failure of attempt 1 cleared.
func TestHistoryRetryThenDeath(t *testing.T) {
	e := worktest.NewEnv(t)
	cfg := e.Config(t, `  - name: r
    schedule: "@every 1m"
    concurrency: allow
    exec: {command: ["true"]}
`)
	h := runlog.NewWriter(cfg, e.RDB, worktest.Logger(t))
	tk := worktest.TickOf("r", 1)
	job, _ := cfg.Job("r")
	ctx := context.Background()
	r1 := jobs.Run{Job: "r", Tick: tk.At, RunID: tk.RunID, Attempt: 1, Fence: 9, Replica: "w1"}
	h.Started(ctx, tk, r1.Replica, r1.Attempt, r1.Fence)
	code := 3
	h.Finished(ctx, tk, job, runlog.End{Replica: r1.Replica, Attempt: r1.Attempt, Fence: r1.Fence, Status: string(jobs.StatusFailed), ExitCode: &code, Reason: "exit 3", Output: "boom"})
	r2 := r1
	r2.Attempt, r2.Replica, r2.Fence = 2, "w2", 10
	h.Started(ctx, tk, r2.Replica, r2.Attempt, r2.Fence)
	recs, err := Read(ctx, e.RDB, cfg.Namespace, "r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != jobs.StatusRunning || recs[0].Attempt != 2 || recs[0].Worker != "w2" || recs[0].Reason != "" || recs[0].ExitCode != nil {
		t.Errorf("records: %+v", recs)
	}
}

// A runtime schedule's history is a list that costs what it holds (a
// stream costs 4.7 KB at least), trimmed to schedules.history runs, and
// reads back as a job's stream does.
func TestRuntimeScheduleHistoryIsACompactListReadAsAStream(t *testing.T) {
	e, h := historyWriter(t, 3)
	ctx := context.Background()
	for _, job := range []string{"listed", "@report/tenant-42"} {
		for i := range 6 {
			tk := worktest.TickOf(job, 0)
			tk.At = tk.At.Add(time.Duration(i) * time.Minute)
			tk.RunID = fmt.Sprintf("r%d", i)
			h.Started(ctx, tk, "w1", 1, 7)
			end := runlog.End{Replica: "w1", Attempt: 1, Status: string(jobs.StatusOK), Fence: 7}
			if runlog.Compact(job) {
				// as the worker writes it: the end of a runtime schedule's
				// run says when it started
				end.Took, end.By = 40*time.Millisecond, tk.Replica
			}
			h.Finished(ctx, tk, &config.Job{Name: job}, end)
		}
	}
	key := runlog.ListKey("baton", "@report/tenant-42")
	if typ := e.RDB.Type(ctx, key).Val(); typ != "list" {
		t.Fatalf("%s is a %s", key, typ)
	}
	if n := e.RDB.LLen(ctx, key).Val(); n != 3 {
		t.Errorf("%d entries kept, want 3: each run's end in place of its start", n)
	}
	if mem := e.RDB.MemoryUsage(ctx, key).Val(); mem > 700 {
		t.Errorf("the list of 3 runs takes %d B", mem)
	}
	got, err := Read(ctx, e.RDB, "baton", "@report/tenant-42", 0)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Read(ctx, e.RDB, "baton", "listed", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].RunID != "r5" || got[0].Status != jobs.StatusOK || got[0].Fence != 7 || got[0].Worker != "w1" {
		t.Fatalf("records %+v", got)
	}
	for i := range want {
		g, w := got[i], want[i]
		g.Job, w.Job = "", ""
		g.Started, w.Started, g.Ended, w.Ended = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("record %d: list %+v, stream %+v", i, g, w)
		}
	}
	since, err := ReadJobsSince(ctx, e.RDB, "baton", []string{"@report/tenant-42"}, time.Now().Add(time.Hour))
	if err != nil || len(since["@report/tenant-42"]) != 0 {
		t.Fatalf("since the future: %+v %v", since, err)
	}
	e.RDB.RPush(ctx, key, "not an entry")
	if _, err := Read(ctx, e.RDB, "baton", "@report/tenant-42", 0); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("a bad element: %v", err)
	}
}

// History fold, schedule: attempt 1 of a tick fails at once (one entry,
// written with its end, took_ms), asynq retries after its backoff, and
// attempt 2 also ends within history.start_after. The record is attempt 2's
// (its worker, its attempt, its end), so its start must be attempt 2's too,
// as it was when every attempt wrote its "started" entry: not attempt 1's,
// which would make the run's duration span both attempts and the backoff.
func TestRetriedRunRecordStartsAtItsLastAttempt(t *testing.T) {
	e := worktest.NewEnv(t)
	cfg := e.Config(t, `  - name: r
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	h := runlog.NewWriter(cfg, e.RDB, worktest.Logger(t))
	job, _ := cfg.Job("r")
	ctx := context.Background()
	for _, long := range []bool{false, true} {
		tk := worktest.TickOf("r", 1)
		tk.RunID = fmt.Sprintf("long-%v", long)
		tk.At = tk.At.Add(map[bool]time.Duration{false: 0, true: time.Minute}[long])
		code := 3
		end1 := runlog.End{Replica: "w1", Attempt: 1, Fence: 9, Status: string(jobs.StatusFailed), ExitCode: &code, Reason: "exit 3"}
		if long { // attempt 1 lasted beyond start_after: it wrote its start
			h.Started(ctx, tk, "w1", 1, 9)
		} else {
			end1.Took, end1.By = 40*time.Millisecond, "sched-1"
		}
		h.Finished(ctx, tk, job, end1)
		time.Sleep(300 * time.Millisecond) // the retry's backoff
		code = 0
		h.Finished(ctx, tk, job, runlog.End{Replica: "w2", Attempt: 2, Fence: 10, Status: string(jobs.StatusOK), ExitCode: &code,
			Took: 40 * time.Millisecond, By: "sched-1"})
		recs, err := Read(ctx, e.RDB, cfg.Namespace, "r", 0)
		if err != nil {
			t.Fatal(err)
		}
		r := recs[0]
		if r.Attempt != 2 || r.Worker != "w2" || r.Ended.Sub(r.Started) != 40*time.Millisecond {
			t.Errorf("attempt 1 long %v: the record of attempt 2 (40ms) started %v, ended %v (%s): %+v",
				long, r.Started, r.Ended, r.Ended.Sub(r.Started), r)
		}
	}
}

// A runtime schedule's compact list keeps schedules.history entries, one
// per run since a short run writes only its end. A run that lasts beyond
// history.start_after writes two ("started", then "finished" without
// took_ms): with schedules.history 1 its own "finished" trims its
// "started", and the record loses its start and its dispatcher; with 3, a
// long run becomes the oldest kept and loses them the same way two runs
// later. A run's record must keep its start whatever it took.
func TestRuntimeScheduleLongRunKeepsItsStart(t *testing.T) {
	e := worktest.NewEnv(t)
	cfg := e.Config(t, `  - name: listed
    schedule: "@every 1m"
    handler: {name: tiny}
`)
	h := runlog.NewWriter(cfg, e.RDB, worktest.Logger(t))
	ctx := context.Background()
	for _, n := range []int{1, 3} {
		cfg.Schedules.History = n
		job := fmt.Sprintf("@report/tenant-%d", n)
		run := func(i int, long bool) {
			tk := minuteTick(job, i)
			end := runlog.End{Replica: "w1", Attempt: 1, Status: string(jobs.StatusOK), Fence: 7, Took: 40 * time.Millisecond, By: "sched-1"}
			if long {
				h.Started(ctx, tk, "w1", 1, 7)
				end.Took = 6 * time.Second
			}
			h.Finished(ctx, tk, &config.Job{Name: job}, end)
		}
		run(0, true)
		for i := 1; i < n; i++ {
			run(i, false)
		}
		recs, err := Read(ctx, e.RDB, "baton", job, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Status == jobs.StatusOK && (r.Started.IsZero() || r.Dispatcher != "sched-1") {
				t.Errorf("schedules.history %d: run %s ended %v with no start or dispatcher: %+v", n, r.RunID, r.Ended, r)
			}
		}
	}
}

// A runtime schedule's list keeps its newest schedules.history elements,
// and every run in it reads whole: a run's end (which says when the run
// started and who dispatched it) takes the place of its start when that is
// the last element, and stands without it otherwise, so trimming never
// leaves a run that ended without its start. Cases: a long run, a retried
// one (an element an attempt), runs that overlap (concurrency allow).
func TestRuntimeScheduleRunsReadWholeFromTheirEnds(t *testing.T) {
	e, h := historyWriter(t, 3)
	ctx := context.Background()
	const job = "@report/whole"
	tick := func(i int) scheduler.Tick { return minuteTick(job, i) }
	start := func(i, attempt int) { h.Started(ctx, tick(i), "w1", attempt, 7) }
	end := func(i, attempt int, st jobs.Status) {
		h.Finished(ctx, tick(i), &config.Job{Name: job}, runlog.End{Replica: "w1", Attempt: attempt, Status: string(st), Fence: 7, Took: 2 * time.Second, By: "sched-1"})
	}
	key := runlog.ListKey("baton", job)
	check := func(step string, entries int, runs ...string) {
		t.Helper()
		if n := e.RDB.LLen(ctx, key).Val(); n != int64(entries) {
			t.Errorf("%s: %d entries kept, want %d", step, n, entries)
		}
		recs, err := Read(ctx, e.RDB, "baton", job, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.RunID+" "+string(r.Status))
			if r.Started.IsZero() || r.Dispatcher != "sched-1" {
				t.Errorf("%s: run %s kept without its start or dispatcher: %+v", step, r.RunID, r)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(runs) {
			t.Errorf("%s: runs %v kept, want %v", step, got, runs)
		}
	}
	start(0, 1)
	check("a run under way", 1, "r0 running")
	end(0, 1, jobs.StatusOK)
	check("the run ended", 1, "r0 ok")
	start(1, 1)
	end(1, 1, jobs.StatusFailed)
	start(1, 2)
	end(1, 2, jobs.StatusOK)
	check("a run retried once", 3, "r1 ok", "r0 ok")
	// r2 runs long under allow; r3, r4 and r5 start and end meanwhile
	start(2, 1)
	for i := 3; i <= 5; i++ {
		start(i, 1)
		end(i, 1, jobs.StatusOK)
	}
	check("three short runs beside a long one", 3, "r5 ok", "r4 ok", "r3 ok")
	end(2, 1, jobs.StatusOK)
	check("the long run's end", 3, "r5 ok", "r4 ok", "r2 ok")
}

// historyWriter is a worker's history writer on a test Redis, for a job
// list with one job ("listed") and runtime schedules that keep history
// runs.
func historyWriter(t *testing.T, history int) (*worktest.Env, *runlog.Writer) {
	t.Helper()
	e := worktest.NewEnv(t)
	cfg := e.Config(t, `  - name: listed
    schedule: "@every 1m"
    handler: {name: tiny}
`)
	cfg.Schedules.History = history
	return e, runlog.NewWriter(cfg, e.RDB, worktest.Logger(t))
}

// A run's start whose write timed out can be applied after the run's end
// (the reader lets the end stand: fold). In a runtime schedule's
// list that late start follows the end, so trimming by count drops the end
// first: the run must not then read as running again, for ever after it
// ended.
func TestRuntimeScheduleLateStartDoesNotOutliveItsEnd(t *testing.T) {
	e, h := historyWriter(t, 2)
	ctx := context.Background()
	const job = "@report/late"
	tick := func(i int) scheduler.Tick { return minuteTick(job, i) }
	end := func(i int) {
		h.Finished(ctx, tick(i), &config.Job{Name: job}, runlog.End{Replica: "w1", Attempt: 1, Status: string(jobs.StatusOK), Fence: 7,
			Took: 40 * time.Millisecond, By: "sched-1"})
	}
	end(0)                              // r0's end lands first
	h.Started(ctx, tick(0), "w1", 1, 7) // its start, applied late
	h.Started(ctx, tick(1), "w1", 1, 7) // the next run
	end(1)
	recs, err := Read(ctx, e.RDB, "baton", job, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.RunID == "r0" && r.Status != jobs.StatusOK {
			t.Errorf("run r0 ended ok, reads %s: %+v", r.Status, r)
		}
	}
}

// minuteTick is job's i-th tick a minute apart, run "r<i>", dispatched by
// replica sched-1.
func minuteTick(job string, i int) scheduler.Tick {
	tk := worktest.TickOf(job, 0)
	tk.At = tk.At.Add(time.Duration(i) * time.Minute)
	tk.RunID, tk.Replica = fmt.Sprintf("r%d", i), "sched-1"
	return tk
}
