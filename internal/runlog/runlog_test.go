package runlog

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
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
		{"worker: " + tk.ID() + `: executor: job "report": exec "x": file not found`, `exec "x": file not found`},
		{`executor: non-zero exit: job "report": "sh" exited with code 3`, `non-zero exit: "sh" exited with code 3`},
		{`executor: job "report": http GET https://h/: EOF` + "\nworker: " + tk.ID() + ": execution lease lost mid-run: locking: lost",
			"http GET https://h/: EOF\nexecution lease lost mid-run: locking: lost"},
		{`job "other": stays; the worker: word stays`, `job "other": stays; the worker: word stays`},
		{`scheduler: a prefix of another package stays`, `scheduler: a prefix of another package stays`},
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
	w := testWriter(cfg, rdb, slog.New(slog.DiscardHandler))
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

// A runtime schedule's list holds its entries in the short form (one letter
// field names, a tick in unix ms) and reads back as the stream's, the long
// form of a list written before it too; a tick the ms do not say exactly
// stays its text.
func TestListEntriesAreShortAndReadAsTheStreams(t *testing.T) {
	rdb, w := nsWriter(t)
	ctx := context.Background()
	const job = "@report/short"
	tick := scheduler.Tick{Job: job, At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), RunID: "0123456789abcdef0123456789abcdef", Replica: "d1", Manual: true}
	code := 3
	w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "w1", Attempt: 2, Fence: 77, Status: "failed", ExitCode: &code,
		Reason: "exit 3", Output: "oops", Took: 1500 * time.Millisecond, By: "d1"})
	odd := tick
	odd.At, odd.RunID = tick.At.Add(time.Nanosecond), "FEDCBA9876543210fedcba9876543210" // not runid.New's: kept as it is
	w.Started(ctx, odd, "w2", 1, 78)
	// a run's end with status ok, attempt 1, run by the replica that
	// dispatched it: event, status, attempt and by left out
	plain := scheduler.Tick{Job: job, At: tick.At.Add(time.Minute), RunID: "00112233445566778899aabbccddeeff", Replica: "d1"}
	w.Finished(ctx, plain, &config.Job{Name: job}, End{Replica: "d1", Attempt: 1, Fence: 79, Status: "ok", Took: 20 * time.Millisecond, By: "d1"})
	key := ListKey("ns", job)
	// entries of the long form and of the earlier short form, as a list
	// written before the short one holds
	for _, old := range []string{
		`1764000000000-0 ["v","1","ev","finished","tick","2026-11-28T13:00:00Z","run","aa","replica","w3","attempt","1","status","ok","fence","9"]`,
		`1764000000001-0 ["v","1","e","finished","t","1795867200000","r","bb","w","w4","a","1","s","ok","f","10","d","5","b","d2"]`,
	} {
		if err := rdb.RPush(ctx, key, old).Err(); err != nil {
			t.Fatal(err)
		}
	}
	raw := rdb.LRange(ctx, key, 0, -1).Val()
	short := []*regexp.Regexp{
		regexp.MustCompile(`^\d+-0 \["t","\d+","R","ASNFZ4mrze8BI0VniavN7w","m","1","w","w1","a","2","s","failed","f","77","x","3","y","exit 3","o","oops","d","1500","b","d1"\]$`),
		regexp.MustCompile(`^\d+-\d+ \["e","S","t","2026-11-28T12:00:00.000000001Z","r","FEDCBA9876543210fedcba9876543210","m","1","w","w2","f","78","b","d1"\]$`),
		regexp.MustCompile(`^\d+-\d+ \["t","\d+","R","ABEiM0RVZneImaq7zN3u_w","w","d1","f","79","d","20"\]$`),
	}
	if len(raw) != 5 {
		t.Fatalf("entries %q", raw)
	}
	for i, re := range short {
		if !re.MatchString(raw[i]) {
			t.Errorf("element %d is %s, want %s", i, raw[i], re)
		}
	}
	msgs := readEvents(t, rdb, job)
	if len(msgs) != 5 {
		t.Fatalf("%d entries, want 5: %v", len(msgs), msgs)
	}
	want := []map[string]any{
		{"v": "1", "ev": "finished", "tick": "2026-11-28T12:00:00Z", "run": "bb", "replica": "w4", "attempt": "1", "status": "ok", "fence": "10", "took_ms": "5", "by": "d2"},
		{"v": "1", "ev": "finished", "tick": "2026-11-28T13:00:00Z", "run": "aa", "replica": "w3", "attempt": "1", "status": "ok", "fence": "9"},
		{"v": "1", "ev": "finished", "tick": "2026-11-28T12:01:00Z", "run": plain.RunID, "replica": "d1", "attempt": "1", "status": "ok",
			"fence": "79", "took_ms": "20", "by": "d1"},
		{"v": "1", "ev": "started", "tick": "2026-11-28T12:00:00.000000001Z", "run": odd.RunID, "manual": "1", "replica": "w2", "attempt": "1", "fence": "78", "by": "d1"},
		{"v": "1", "ev": "finished", "tick": "2026-11-28T12:00:00Z", "run": tick.RunID, "manual": "1", "replica": "w1", "attempt": "2", "status": "failed",
			"fence": "77", "exit_code": "3", "reason": "exit 3", "output": "oops", "took_ms": "1500", "by": "d1"},
	}
	for i, m := range msgs { // newest first
		if fmt.Sprint(m.Values) != fmt.Sprint(want[i]) {
			t.Errorf("entry %d reads %v\n                want %v", i, m.Values, want[i])
		}
	}
}

// A list element holds its tick as how long before the element it was;
// an event written long after its tick (a run of a day), or before it (a
// Redis whose clock is behind the writer's), reads back its tick exactly.
func TestListTickFarFromItsElementReadsBack(t *testing.T) {
	rdb, w := nsWriter(t)
	ctx := context.Background()
	const job = "@report/far"
	for _, at := range []time.Time{time.Now().Add(-26 * time.Hour).Truncate(time.Millisecond).UTC(), time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()} {
		tick := scheduler.Tick{Job: job, At: at, RunID: runidOf(at), Replica: "d1"}
		w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "d1", Attempt: 1, Status: "ok", Took: time.Second, By: "d1"})
		msgs := readEvents(t, rdb, job)
		if got := msgs[0].Values["tick"]; got != at.Format(time.RFC3339Nano) {
			t.Errorf("tick %s reads back %v (element %q)", at.Format(time.RFC3339Nano), got, rdb.LIndex(ctx, ListKey("ns", job), -1).Val())
		}
	}
}

func runidOf(at time.Time) string { return fmt.Sprintf("%032x", at.UnixMilli()) }

// A run's start only appends to its job's history: the run's end trims it
// and renews its expiry. A start that makes the history sets its expiry,
// so a worker that dies mid-run leaves nothing that lives for ever. Both
// forms: a job's stream, a runtime schedule's list.
func TestStartAppendsAndTheEndRenews(t *testing.T) {
	rdb, w := nsWriter(t)
	ctx := context.Background()
	for _, job := range []string{"listed", "@report/starts"} {
		key := Key("ns", job)
		if Compact(job) {
			key = ListKey("ns", job)
		}
		tick := scheduler.Tick{Job: job, At: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), RunID: "0123456789abcdef0123456789abcdef", Replica: "d1"}
		w.Started(ctx, tick, "w1", 1, 5)
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
			t.Errorf("%s: a start that makes the history leaves it a ttl of %v, want the max age", job, ttl)
		}
		if err := rdb.PExpire(ctx, key, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		w.Started(ctx, tick, "w1", 2, 6)
		if ttl := rdb.PTTL(ctx, key).Val(); ttl > time.Minute {
			t.Errorf("%s: a start renewed the history's expiry to %v", job, ttl)
		}
		w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "w1", Attempt: 2, Fence: 6, Status: "ok"})
		if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute {
			t.Errorf("%s: the end left the history a ttl of %v, want the max age", job, ttl)
		}
		if msgs := readEvents(t, rdb, job); len(msgs) != 3 {
			t.Errorf("%s: %d entries, want two starts and an end", job, len(msgs))
		}
	}
}

// nsWriter is a history writer of namespace "ns" on a test Redis: 10 runs
// kept, of the list's jobs and of runtime schedules, for an hour.
func nsWriter(t *testing.T) (*redis.Client, *Writer) {
	t.Helper()
	rdb := redistest.New(t).TestClient(t)
	cfg := &config.Config{Namespace: "ns", History: config.HistoryConfig{Runs: 10, MaxAge: time.Hour}, Schedules: config.SchedulesConfig{History: 10}}
	return rdb, testWriter(cfg, rdb, slog.New(slog.DiscardHandler))
}

// A tick before 1970 (unix ms below zero) written in the list's short form
// reads back as the tick it was, as the stream's does.
func TestListTickBefore1970ReadsBack(t *testing.T) {
	rdb, w := nsWriter(t)
	ctx := context.Background()
	const job = "@report/old"
	tick := scheduler.Tick{Job: job, At: time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC), RunID: "0123456789abcdef0123456789abcdef", Replica: "d1"}
	w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "w1", Attempt: 1, Status: "ok", Took: time.Second, By: "d1"})
	msgs := readEvents(t, rdb, job)
	if len(msgs) != 1 {
		t.Fatalf("%d entries, want 1: %v", len(msgs), msgs)
	}
	if got := msgs[0].Values["tick"]; got != "1969-07-20T20:17:00Z" {
		t.Errorf("tick reads back %q, want 1969-07-20T20:17:00Z (element %q)", got, rdb.LIndex(ctx, ListKey("ns", job), 0).Val())
	}
}

// Runs whose workers die mid-run write starts and no ends. A runtime
// schedule's list, which the design bounds at schedules.history elements,
// must stay near that bound, as a job's stream does (its start trims by
// count), not grow with every attempt until the list expires.
func TestListOfStartsWithoutEndsStaysBounded(t *testing.T) {
	rdb, w := nsWriter(t) // schedules.history 10
	ctx := context.Background()
	for _, job := range []string{"listed", "@report/killed"} {
		for i := range 200 {
			tick := scheduler.Tick{Job: job, At: time.Date(2026, 11, 28, 12, 0, i, 0, time.UTC), RunID: fmt.Sprintf("run-%03d", i), Replica: "d1"}
			w.Started(ctx, tick, "w1", 1, int64(i))
		}
		key := Key("ns", job)
		n := rdb.XLen(ctx, key).Val()
		if Compact(job) {
			key = ListKey("ns", job)
			n = rdb.LLen(ctx, key).Val()
		}
		if n > 100 {
			t.Errorf("%s: %d starts kept of 200 runs, history of 10 runs (%d B)", key, n, rdb.MemoryUsage(ctx, key).Val())
		}
	}
}

// readEvents reads job's history entries in namespace "ns", newest first.
func readEvents(t *testing.T, rdb *redis.Client, job string) []redis.XMessage {
	t.Helper()
	pipe := rdb.Pipeline()
	ev := QueueRead(context.Background(), pipe, "ns", job, 0, 0)
	if _, err := pipe.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
	msgs, err := ev.Result()
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// A job's run writes its start and its end to its stream without a script:
// an XADD that makes nothing, then an XADD that trims by age from the
// start's time (MINID) and PEXPIRE. A start whose stream does not exist makes it with its
// expiry (by script, once), and the end trims entries older than the max
// age before the start and renews the expiry.
func TestRunStartAndEndAreWrittenWithoutScripts(t *testing.T) {
	rdb, w := nsWriter(t)
	ctx := context.Background()
	job := "plain"
	key := Key("ns", job)
	tick := scheduler.Tick{Job: job, At: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), RunID: "0123456789abcdef0123456789abcdef", Replica: "d1"}
	if id := w.Started(ctx, tick, "w1", 1, 5); id == "" {
		t.Fatal("the first start wrote nothing")
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("a start that makes the stream leaves it a ttl of %v, want the max age", ttl)
	}
	// a stream of 300 entries from before the max age: three nodes that
	// the end's trim frees
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour).UnixMilli()
	for i := range 300 {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, ID: strconv.FormatInt(old, 10) + "-" + strconv.Itoa(i+1), Values: []any{"ev", "x"}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.PExpire(ctx, key, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	before := redistest.CommandCalls(t, rdb)
	id := w.Started(ctx, tick, "w1", 2, 6)
	w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "w1", Attempt: 2, Fence: 6, Status: "ok", StartID: id})
	after := redistest.CommandCalls(t, rdb)
	if d := after["evalsha"] + after["eval"] - before["evalsha"] - before["eval"]; d != 0 {
		t.Errorf("a run's start and end ran %d scripts, want none", d)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute {
		t.Errorf("the end left the stream a ttl of %v, want the max age", ttl)
	}
	if n := rdb.XLen(ctx, key).Val(); n > 102 {
		t.Errorf("%d entries after the end, want the entries older than the max age trimmed", n)
	}
	msgs, err := rdb.XRevRangeN(ctx, key, "+", "-", 2).Result()
	if err != nil || len(msgs) != 2 || msgs[0].Values["ev"] != EvFinished || msgs[1].ID != id {
		t.Errorf("newest entries %+v (%v), want the start %s and its end", msgs, err, id)
	}
}

// Schedule: a run's start lands in its job's stream; by its end the queue
// Redis is full (maxmemory with noeviction, the policy baton requires), so
// the end's XADD is refused with OOM. "History is a record ... a failure is
// logged": the lost end must be logged, as the script path logs it, not
// dropped silently (the run would then show as running until the stream
// expires, with nothing in the log to say why).
func TestLostRunEndIsLogged(t *testing.T) {
	rdb := redistest.New(t).TestClient(t)
	var logs worktest.Logs
	cfg := &config.Config{Namespace: "ns", History: config.HistoryConfig{Runs: 10, MaxAge: time.Hour}, Schedules: config.SchedulesConfig{History: 10}}
	w := testWriter(cfg, rdb, logs.Logger())
	ctx := context.Background()
	job := "full"
	tick := scheduler.Tick{Job: job, At: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), RunID: "0123456789abcdef0123456789abcdef", Replica: "d1"}
	id := w.Started(ctx, tick, "w1", 1, 5)
	if id == "" {
		t.Fatal("the start wrote nothing")
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") })
	w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "w1", Attempt: 1, Fence: 5, Status: "ok", StartID: id})
	rdb.ConfigSet(ctx, "maxmemory", "0")
	if n := rdb.XLen(ctx, Key("ns", job)).Val(); n != 1 {
		t.Fatalf("%d entries: the end was written (the schedule needs it refused)", n)
	}
	if logs.Count("cannot write the run history") == 0 {
		t.Errorf("the run's end was lost (OOM) and nothing was logged; log: %q", logs.String())
	}
}

// rollingRun writes one run of job with w: its start, then its end (plain
// commands: the start wrote an entry).
func rollingRun(t *testing.T, w *Writer, job string, at time.Time, i int) {
	t.Helper()
	ctx := context.Background()
	tick := scheduler.Tick{Job: job, At: at, RunID: fmt.Sprintf("%032x", i), Replica: "d1"}
	id := w.Started(ctx, tick, "w1", 1, int64(i))
	if id == "" {
		t.Fatalf("run %d: no start", i)
	}
	w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "w1", Attempt: 1, Fence: int64(i), Status: "ok", StartID: id})
}

// Schedule (a rolling upgrade): a worker of this release ends a run of a
// job; a replica of an earlier release ends a run of the same job, its end
// setting the stream's expiry to the max age from then; five minutes later
// the worker ends another run. That end is kept history.max_age after it
// was written: every end renews the expiry, whatever the others did.
func TestRunEndKeepsItsMaxAgeBesideAnOlderReleasesEnds(t *testing.T) {
	clk := redistest.NewTestClock(t)
	rdb := redistest.New(t, redistest.WithClock(clk)).TestClient(t)
	cfg := &config.Config{Namespace: "ns", History: config.HistoryConfig{Runs: 10, MaxAge: time.Hour}, Schedules: config.SchedulesConfig{History: 10}}
	w := testWriter(cfg, rdb, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	job := "rolling"
	key := Key("ns", job)
	rollingRun(t, w, job, time.Now(), 1)

	// the earlier release's run: its start, and its end as that release's
	// plain end writes it (XADD MAXLEN ~, XTRIM MINID ~, PEXPIRE)
	maxAge := cfg.History.MaxAge
	start, err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: key, NoMkStream: true, MaxLen: 30, Approx: true, Values: []any{"v", "1", "ev", EvStarted, "run", "old"}}).Result()
	if err != nil {
		t.Fatal(err)
	}
	since, _ := idTime(start)
	pipe := rdb.Pipeline()
	pipe.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: 30, Approx: true, Values: []any{"v", "1", "ev", EvFinished, "run", "old", "status", "ok"}})
	pipe.XTrimMinIDApprox(ctx, key, strconv.FormatInt(since-maxAge.Milliseconds(), 10), 0)
	pipe.PExpire(ctx, key, maxAge)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	if err := clk.Step(5 * time.Minute); err != nil {
		t.Fatal(err)
	}
	rollingRun(t, w, job, time.Now(), 3)
	if ttl := rdb.PTTL(ctx, key).Val(); ttl < maxAge-time.Second {
		t.Errorf("the end just written is kept %v (the stream's ttl), want at least the max age %v", ttl, maxAge)
	}
}

// Schedule (the queue Redis reloads a snapshot): a worker ends a run; the
// queue Redis saves a snapshot; eight minutes later the worker ends another
// run; the queue Redis comes back from the snapshot, its stream with the
// first run's expiry; five minutes later the worker ends a run. That end
// is kept history.max_age after it was written.
func TestRunEndKeepsItsMaxAgeAfterTheQueueRedisReloadsASnapshot(t *testing.T) {
	clk := redistest.NewTestClock(t)
	srv := redistest.New(t, redistest.WithClock(clk))
	rdb := srv.TestClient(t)
	cfg := &config.Config{Namespace: "ns", History: config.HistoryConfig{Runs: 10, MaxAge: time.Hour}, Schedules: config.SchedulesConfig{History: 10}}
	w := testWriter(cfg, rdb, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	job := "reloaded"
	key := Key("ns", job)
	step := func(d time.Duration) {
		t.Helper()
		if err := clk.Step(d); err != nil {
			t.Fatal(err)
		}
	}
	rollingRun(t, w, job, time.Now(), 1)
	if err := srv.Save(); err != nil {
		t.Fatal(err)
	}
	step(8 * time.Minute)
	rollingRun(t, w, job, time.Now(), 2)
	if err := srv.RestartFromSnapshot(); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 5*time.Second, "the queue Redis back", func() bool { return rdb.Ping(ctx).Err() == nil })
	if rdb.Exists(ctx, key).Val() != 1 {
		t.Fatal("the snapshot holds no stream")
	}
	step(5 * time.Minute)
	rollingRun(t, w, job, time.Now(), 3)
	if n := rdb.XLen(ctx, key).Val(); n < 4 {
		t.Fatalf("%d entries: the last run was not written", n)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl < cfg.History.MaxAge-time.Second {
		t.Errorf("the end just written is kept %v (the stream's ttl), want at least the max age %v", ttl, cfg.History.MaxAge)
	}
}

// A run's end whose stream went during the run (expired, deleted) makes it
// again, with its expiry, holding the end.
func TestRunEndMakesAStreamThatWentDuringTheRun(t *testing.T) {
	rdb, w := nsWriter(t)
	ctx := context.Background()
	job := "gone"
	key := Key("ns", job)
	tick := scheduler.Tick{Job: job, At: time.Now(), RunID: fmt.Sprintf("%032x", 1), Replica: "d1"}
	id := w.Started(ctx, tick, "w1", 1, 1)
	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "w1", Attempt: 1, Fence: 1, Status: "ok", StartID: id})
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
		t.Errorf("ttl %v of the stream the end made, want the max age", ttl)
	}
	if msgs := readEvents(t, rdb, job); len(msgs) != 1 || msgs[0].Values["ev"] != EvFinished {
		t.Errorf("the made stream holds %v, want the end", msgs)
	}
}

// A run's end takes its start's place in a runtime schedule's list, and a
// start applied after its own end (a write that timed out and landed late)
// is not appended, whatever form the run id and the attempt take in the
// element (runid.New's id in base64, attempt 1 left out).
func TestRunEndTakesItsStartsPlaceInTheList(t *testing.T) {
	rdb, w := nsWriter(t)
	ctx := context.Background()
	const job = "@report/place"
	for i, c := range []struct {
		run     string
		attempt int
		status  string
	}{{"00112233445566778899aabbccddeeff", 1, "ok"}, {"00112233445566778899aabbccddee00", 2, "failed"}, {"run-not-hex", 1, "ok"}} {
		tick := scheduler.Tick{Job: job, At: time.Date(2026, 12, 2, 12, i, 0, 0, time.UTC), RunID: c.run, Replica: "d1"}
		w.Started(ctx, tick, "d1", c.attempt, 5)
		w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "d1", Attempt: c.attempt, Fence: 5, Status: c.status, Took: time.Second, By: "d1"})
		w.Started(ctx, tick, "d1", c.attempt, 5) // late
		if n := rdb.LLen(ctx, ListKey("ns", job)).Val(); n != int64(i+1) {
			t.Errorf("run %s attempt %d: %d elements, want %d: %q", c.run, c.attempt, n, i+1, rdb.LRange(ctx, ListKey("ns", job), 0, -1).Val())
		}
	}
	msgs := readEvents(t, rdb, job)
	if len(msgs) != 3 || msgs[0].Values["run"] != "run-not-hex" || msgs[1].Values["attempt"] != "2" || msgs[1].Values["status"] != "failed" || msgs[2].Values["status"] != "ok" || msgs[2].Values["run"] != "00112233445566778899aabbccddeeff" {
		t.Errorf("entries %v", msgs)
	}
}

// A run id of any other form than runid.New's (a task's from elsewhere)
// is compared as itself: a run's end takes its start's place and a late
// start after its end is not appended, whatever characters JSON escapes
// in the element the id holds (a quote, a backslash, a slash).
func TestRunEndTakesItsStartsPlaceWhateverItsRunIDHolds(t *testing.T) {
	rdb, w := nsWriter(t)
	ctx := context.Background()
	for i, run := range []string{`a"b`, `a\b`, "run-@report/x-1", `"`, "ré\u2028run", "FEDCBA9876543210FEDCBA9876543210", "ASNFZ4mrze8BI0VniavN7w", "r"} {
		job := fmt.Sprintf("@report/ids-%d", i)
		key := ListKey("ns", job)
		tick := scheduler.Tick{Job: job, At: time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), RunID: run, Replica: "d1"}
		w.Started(ctx, tick, "d1", 1, 5)
		w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "d1", Attempt: 1, Fence: 5, Status: "ok", Took: time.Second, By: "d1"})
		w.Started(ctx, tick, "d1", 1, 5) // late: applied after its end
		if n := rdb.LLen(ctx, key).Val(); n != 1 {
			t.Errorf("run %q: %d elements, want its end alone: %q", run, n, rdb.LRange(ctx, key, 0, -1).Val())
			continue
		}
		if msgs := readEvents(t, rdb, job); msgs[0].Values["run"] != run || msgs[0].Values["ev"] != EvFinished {
			t.Errorf("run %q reads back %v", run, msgs[0].Values)
		}
	}
}

// A runtime schedule's list keeps its newest success beyond the count
// while none of the kept runs succeeded: marked as kept, as the oldest
// element; a newer success lets it go.
func TestLastSuccessSurvivesTheHistoryCount(t *testing.T) {
	rdb := redistest.New(t).TestClient(t)
	cfg := &config.Config{Namespace: "ns", History: config.HistoryConfig{Runs: 10, MaxAge: time.Hour}, Schedules: config.SchedulesConfig{History: 3}}
	w := testWriter(cfg, rdb, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	const job = "@report/failing"
	key := ListKey("ns", job)
	end := func(i int, status string) {
		t.Helper()
		tick := scheduler.Tick{Job: job, At: time.Date(2026, 12, 2, 12, i, 0, 0, time.UTC), RunID: fmt.Sprintf("run-%d", i), Replica: "d1"}
		w.Started(ctx, tick, "d1", 1, 5)
		w.Finished(ctx, tick, &config.Job{Name: job}, End{Replica: "d1", Attempt: 1, Fence: 5, Status: status, Took: time.Second, By: "d1"})
	}
	end(0, "ok")
	for i := 1; i <= 4; i++ {
		end(i, "failed")
	}
	msgs := readEvents(t, rdb, job)
	if len(msgs) != 4 || msgs[3].Values["run"] != "run-0" || msgs[3].Values["status"] != "ok" || msgs[3].Values["kept"] != "1" || msgs[0].Values["run"] != "run-4" {
		t.Fatalf("after 4 failures the list holds %d: %v (%q)", len(msgs), msgs, rdb.LRange(ctx, key, 0, -1).Val())
	}
	for _, m := range msgs[:3] {
		if m.Values["kept"] != nil {
			t.Errorf("a failed run marked kept: %v", m.Values)
		}
	}
	end(5, "ok")
	msgs = readEvents(t, rdb, job)
	if len(msgs) != 3 || msgs[0].Values["run"] != "run-5" || msgs[2].Values["run"] != "run-3" {
		t.Fatalf("after a success the list holds %d: %v", len(msgs), msgs)
	}
}

// testWriter is NewWriter whose starts wait as long as the other writes: a
// run's start gives up sooner in production, so as not to delay the run,
// and a busy test machine can take longer than that to answer; the tests
// here are about what is written.
func testWriter(cfg *config.Config, rdb redis.UniversalClient, log *slog.Logger) *Writer {
	w := NewWriter(cfg, rdb, log)
	w.startTimeout = historyTimeout
	return w
}
