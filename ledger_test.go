package baton_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/runlog"
	"github.com/batonhq/baton/internal/wiring"
	"github.com/batonhq/baton/jobs"
	"github.com/batonhq/baton/scheduler"
)

// ledgerCluster starts a queue Redis with job r (on schedule, starting
// deadline 5m, forbid, a 1h timeout) and a singleton in namespace ns, the
// lock masters masters (none: the queue Redis), and returns a client of the
// queue Redis, a Cluster on them and Redis's time.
func ledgerCluster(t *testing.T, ns, schedule string, masters ...*redistest.Server) (*redis.Client, *config.Config, *baton.Cluster, time.Time) {
	t.Helper()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	var urls []string
	for _, m := range masters {
		urls = append(urls, fmt.Sprintf("%q", "redis://"+m.Addr()+"/0"))
	}
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true, masters: [%s]}
namespace: %s
jobs:
  - name: r
    schedule: %q
    starting_deadline: 5m
    exec: {command: ["true"]}
  - name: pump
    mode: singleton
    exec: {command: ["true"]}
`, srv.Addr(), strings.Join(urls, ", "), ns, schedule))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, cfg)
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return rdb, cfg, c, now.UTC()
}

// historyEvent is one entry of a job's history stream, written at the
// instant at (its stream ID), as a worker or the scheduler writes it.
type historyEvent struct {
	at     time.Time
	fields []any
}

// writeHistory appends events to job's history in the order of their
// instants (a stream's IDs only grow).
func writeHistory(t *testing.T, rdb *redis.Client, ns, job string, evs []historyEvent) {
	t.Helper()
	slices.SortStableFunc(evs, func(a, b historyEvent) int { return a.at.Compare(b.at) })
	for i, e := range evs {
		if err := rdb.XAdd(context.Background(), &redis.XAddArgs{
			Stream: ns + ":{history:" + job + "}",
			ID:     fmt.Sprintf("%d-%d", e.at.UnixMilli(), i+1),
			Values: append([]any{"v", "1"}, e.fields...),
		}).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// run is what a worker writes for a run of tick at: started and, unless
// status is empty, finished; extra fields go on both.
func run(at time.Time, id string, took time.Duration, status string, extra ...any) []historyEvent {
	tick := at.UTC().Format(time.RFC3339Nano)
	start := at.Add(100 * time.Millisecond)
	evs := []historyEvent{{start, append([]any{"ev", "started", "tick", tick, "run", id, "replica", "w1", "attempt", 1, "fence", 7, "by", "s1"}, extra...)}}
	if status != "" {
		evs = append(evs, historyEvent{start.Add(took), append([]any{"ev", "finished", "tick", tick, "run", id, "replica", "w1", "attempt", 1,
			"fence", 7, "status", status}, extra...)})
	}
	return evs
}

// notRun is what the scheduler (missed, paused) or a worker (refused)
// writes for tick at that did not run.
func notRun(at time.Time, status, reason string) historyEvent {
	return historyEvent{at.Add(200 * time.Millisecond), []any{"ev", "not_run", "tick", at.UTC().Format(time.RFC3339Nano), "run", "", "status", status, "reason", reason}}
}

// The ledger lists every tick of the window in order with its outcome: ran
// ok or failed (with exit code, reason, duration, replica, attempt,
// fence), skipped, dropped, refused, running, missed (recorded so by a
// catch-up, or with no record at all past the starting deadline: no
// scheduler was up), paused (with who paused the job, since when and why),
// paused and then backfilled (run, or dispatched and not started yet),
// dispatched and being dispatched (the tick records), due, not yet due; a trigger's run at its own tick, marked
// manual; and, before what the history keeps, unknown: not missed.
func TestTicksListsEveryOutcome(t *testing.T) {
	t.Parallel()
	const ns = "ledger"
	rdb, _, c, now := ledgerCluster(t, ns, "@every 1m")
	ctx := context.Background()
	base := now.Truncate(time.Minute)
	ago := func(m int) time.Time { return base.Add(-time.Duration(m) * time.Minute) }

	var evs []historyEvent
	evs = append(evs, run(ago(20), "run-20", time.Second, "ok", "exit_code", 0)...) // the oldest entry: the history's knowledge starts here
	evs = append(evs, run(ago(19), "run-19", 2*time.Second, "ok", "exit_code", 0)...)
	fail := run(ago(18), "run-18", 3*time.Second, "failed", "exit_code", 3)
	fail[1].fields = append(fail[1].fields, "reason", `non-zero exit: "sh" exited with code 3`, "output", "step 1\nERROR: vendor down\n")
	evs = append(evs, fail...)
	skip := run(ago(17), "run-17", 0, "skipped")[1:] // a skipped tick never started
	skip[0].fields = append(skip[0].fields, "reason", "another run holds the job")
	evs = append(evs, skip...)
	evs = append(evs, notRun(ago(16), "missed", "past its starting deadline"))
	// ago(15): no record at all (no scheduler was up)
	evs = append(evs, notRun(ago(14), "paused", "the job is paused"), notRun(ago(13), "paused", "the job is paused"))
	evs = append(evs, notRun(ago(12), "paused", "the job is paused"))
	evs = append(evs, run(ago(12), "run-12", time.Second, "ok", "backfill", "1")...)
	evs = append(evs, notRun(ago(10), "refused", "its tick is done"))
	evs = append(evs, run(ago(9), "run-9", 0, "")...) // started, not ended
	drop := run(ago(8), "run-8", 0, "dropped")[1:]
	evs = append(evs, drop...)
	evs = append(evs, notRun(ago(5), "paused", "the job is paused")) // then backfilled: dispatched, not started

	writeHistory(t, rdb, ns, "r", evs)
	// the tick records: ago(3) dispatched, not started yet; ago(2) a
	// replica holds its claim; ago(6), ago(5): nothing, past the deadline;
	// ago(4) onwards: within it
	for _, at := range []time.Time{ago(3), ago(5)} {
		if err := rdb.Set(ctx, scheduler.TickKey(ns, "r", at), "done", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Set(ctx, scheduler.TickKey(ns, "r", ago(2)), "0123456789abcdef0123456789abcdef", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// paused since ago(14), with a note
	if res, err := c.Pause(ctx, "r", baton.PauseNote{By: "alice", Note: "vendor fix"}); err != nil || !res.InEffect {
		t.Fatalf("pause: %+v %v", res, err)
	}
	backdatePause(t, rdb, ns, "r", ago(14))
	trig, err := c.Trigger(ctx, "r", "ops")
	if err != nil {
		t.Fatal(err)
	}

	l, err := c.Ticks(ctx, "r", ago(25), base.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if l.Job != "r" || l.Schedule != "@every 1m" || !l.From.Equal(ago(25)) || !l.To.Equal(base.Add(2*time.Minute)) || l.Now.Before(now) || len(l.Warnings) > 0 {
		t.Errorf("ledger %+v", *l)
	}
	if want := ago(20).Add(100 * time.Millisecond); !l.KnownFrom.Equal(want) {
		t.Errorf("known_from %v, want the history's oldest entry %v", l.KnownFrom, want)
	}
	byTick := map[time.Time]baton.LedgerTick{}
	var manual []baton.LedgerTick
	for i, lt := range l.Ticks {
		if i > 0 && lt.Tick.Before(l.Ticks[i-1].Tick) {
			t.Errorf("ticks out of order: %v after %v", lt.Tick, l.Ticks[i-1].Tick)
		}
		if lt.Manual {
			manual = append(manual, lt)
			continue
		}
		byTick[lt.Tick] = lt
	}
	if len(byTick) != 28 { // ago(25) .. min+2m
		t.Errorf("%d scheduled ticks, want 28", len(byTick))
	}
	// due within the starting deadline, ahead not due: by the clock the
	// ledger was read at (a minute may have begun since now); both carry
	// the pause
	timed := func(at time.Time) baton.Outcome {
		switch {
		case at.After(l.Now):
			return baton.OutcomeNotDue
		case l.Now.Before(at.Add(5 * time.Minute)):
			return baton.OutcomeDue
		}
		return baton.OutcomeMissed
	}
	paused := func(lt baton.LedgerTick) bool {
		return lt.Outcome == baton.OutcomeMissed || lt.Pause != nil && lt.Pause.By == "alice" && lt.Pause.Note == "vendor fix"
	}
	for _, tc := range []struct {
		at      time.Time
		outcome baton.Outcome
		check   func(lt baton.LedgerTick) bool
	}{
		{ago(25), baton.OutcomeUnknown, nil},
		{ago(21), baton.OutcomeUnknown, func(lt baton.LedgerTick) bool { return strings.Contains(lt.Reason, "before what the history") }},
		{ago(20), baton.OutcomeOK, nil},
		{ago(19), baton.OutcomeOK, func(lt baton.LedgerTick) bool {
			return lt.RunID == "run-19" && lt.DurationMS == 2000 && lt.Worker == "w1" && lt.Dispatcher == "s1" && lt.Attempt == 1 && lt.Fence == 7 &&
				lt.ExitCode != nil && *lt.ExitCode == 0 && !lt.Backfill
		}},
		{ago(18), baton.OutcomeFailed, func(lt baton.LedgerTick) bool {
			return lt.Status == "failed" && lt.ExitCode != nil && *lt.ExitCode == 3 && strings.Contains(lt.Reason, "code 3") &&
				strings.Contains(lt.Output, "vendor down") && lt.DurationMS == 3000
		}},
		{ago(17), baton.OutcomeSkipped, func(lt baton.LedgerTick) bool { return lt.Reason == "another run holds the job" }},
		{ago(16), baton.OutcomeMissed, func(lt baton.LedgerTick) bool { return lt.Reason == "past its starting deadline" }},
		{ago(15), baton.OutcomeMissed, func(lt baton.LedgerTick) bool {
			return strings.Contains(lt.Reason, "no replica dispatched it within its starting deadline")
		}},
		{ago(14), baton.OutcomePaused, func(lt baton.LedgerTick) bool {
			return lt.Pause != nil && lt.Pause.By == "alice" && lt.Pause.Note == "vendor fix" && lt.Pause.At.Equal(ago(14))
		}},
		{ago(13), baton.OutcomePaused, func(lt baton.LedgerTick) bool { return lt.Pause != nil && lt.Pause.Note == "vendor fix" }},
		{ago(12), baton.OutcomeOK, func(lt baton.LedgerTick) bool { return lt.Backfill && lt.RunID == "run-12" && lt.Pause == nil }},
		{ago(11), baton.OutcomeMissed, nil},
		{ago(10), baton.OutcomeRefused, func(lt baton.LedgerTick) bool { return lt.Reason == "its tick is done" }},
		// recorded running by a worker the roster does not have: it died
		{ago(9), baton.OutcomeUnknown, func(lt baton.LedgerTick) bool {
			return lt.RunID == "run-9" && lt.DurationMS == 0 && lt.Status == "running" && strings.Contains(lt.Reason, `its worker "w1" is no longer in the roster`)
		}},
		{ago(8), baton.OutcomeDropped, nil},
		{ago(6), baton.OutcomeMissed, nil},
		{ago(5), baton.OutcomeDispatched, func(lt baton.LedgerTick) bool { return lt.Backfill && lt.Status == "paused" && lt.Pause == nil }},
		{ago(4), timed(ago(4)), paused},
		{ago(3), baton.OutcomeDispatched, nil},
		{ago(2), baton.OutcomeDispatching, nil},
		{ago(1), timed(ago(1)), paused},
		{base.Add(time.Minute), timed(base.Add(time.Minute)), paused},
		{base.Add(2 * time.Minute), timed(base.Add(2 * time.Minute)), paused},
	} {
		lt, ok := byTick[tc.at]
		switch {
		case !ok:
			t.Errorf("tick %v (%s) not listed", tc.at, tc.outcome)
		case lt.Outcome != tc.outcome:
			t.Errorf("tick %v: outcome %s, want %s (%+v)", tc.at, lt.Outcome, tc.outcome, lt)
		case tc.check != nil && !tc.check(lt):
			t.Errorf("tick %v (%s): %+v", tc.at, tc.outcome, lt)
		}
	}
	if len(manual) != 1 || manual[0].RunID != trig.RunID || !manual[0].Tick.Equal(trig.At) || manual[0].Outcome != baton.OutcomeDispatched || manual[0].Dispatcher != "ops" {
		t.Errorf("manual runs %+v, want the trigger %s at %v", manual, trig.RunID, trig.At)
	}
}

// Without a start the ledger reads the last 24 hours up to its end, cut to
// the last 100 ticks; without an end, up to now. A window of more than
// 10,000 ticks is refused naming the limit, as is one that ends before it
// starts; an unknown job and a singleton are refused too.
func TestTicksWindow(t *testing.T) {
	t.Parallel()
	_, _, c, now := ledgerCluster(t, "window", "@every 1m")
	ctx := context.Background()
	l, err := c.Ticks(ctx, "r", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Ticks) != baton.DefaultLedgerTicks || l.To.Before(now) || !l.From.Equal(l.Ticks[0].Tick) || l.Ticks[99].Tick.After(l.To) {
		t.Errorf("default window: %d ticks from %v to %v (now %v)", len(l.Ticks), l.From, l.To, now)
	}
	hourly := now.Truncate(time.Hour)
	l, err = c.Ticks(ctx, "r", time.Time{}, hourly)
	if err != nil || !l.To.Equal(hourly) || !l.From.Equal(hourly.Add(-99*time.Minute)) {
		t.Errorf("window to %v: %v to %v, %v", hourly, l.From, l.To, err)
	}
	for _, tc := range []struct {
		from, to time.Time
		job      string
		want     error
		text     string
	}{
		{now.Add(-10001 * time.Minute), now, "r", baton.ErrTickWindow, "more than 10000 ticks"},
		{now, now.Add(-time.Hour), "r", baton.ErrTickWindow, "before it starts"},
		{time.Time{}, time.Time{}, "nope", baton.ErrUnknownJob, `no job "nope"`},
		{time.Time{}, time.Time{}, "pump", baton.ErrNotTriggerable, "singleton"},
	} {
		_, err := c.Ticks(ctx, tc.job, tc.from, tc.to)
		if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.text) {
			t.Errorf("Ticks(%s, %v, %v): %v, want %v naming %q", tc.job, tc.from, tc.to, err, tc.want, tc.text)
		}
	}
	if _, err := c.Ticks(ctx, "r", now.Add(-9999*time.Minute), now); err != nil {
		t.Errorf("a window of 10,000 ticks: %v", err)
	}
}

// roundTrips counts what a go-redis client sends: one round trip per
// command or pipeline, and the commands in them; a new connection's own
// set-up (HELLO, CLIENT SETINFO, AUTH, SELECT) is not counted: the pool
// dials when reads run side by side, at its own pace.
type roundTrips struct{ trips, commands atomic.Int64 }

func setup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select":
		return true
	}
	return false
}

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !setup(cmd) {
			r.trips.Add(1)
			r.commands.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !setup(cmds[0]) {
			r.trips.Add(1)
			r.commands.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// A ledger read costs the same round trips and commands whatever the
// window: 10 ticks or 1,000 (pipelined reads of the history and the tick
// records, whose number the records' retention bounds), on one Redis (5)
// and on three lock masters besides the queue Redis (3 + 2 per master,
// side by side).
func TestTicksRoundTripsBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		masters int
		trips   int64
	}{{"one Redis", 0, 6}, {"three lock masters", 3, 10}} {
		t.Run(tc.name, func(t *testing.T) {
			var masters []*redistest.Server
			if tc.masters > 0 {
				masters = redistest.NewN(t, tc.masters)
			}
			rdb, _, c, now := ledgerCluster(t, "trips", "@every 1s", masters...)
			ctx := context.Background()
			var evs []historyEvent
			for i := range 200 {
				at := now.Truncate(time.Second).Add(-time.Duration(i+2) * time.Second)
				evs = append(evs, run(at, fmt.Sprintf("run-%d", i), time.Millisecond, "ok")...)
			}
			writeHistory(t, rdb, "trips", "r", evs)
			count := &roundTrips{}
			baton.HookCluster(c, count)
			measure := func(n int) (int64, int64) {
				count.trips.Store(0)
				count.commands.Store(0)
				to := now.Truncate(time.Second)
				l, err := c.Ticks(ctx, "r", to.Add(-time.Duration(n-1)*time.Second), to)
				if err != nil || len(l.Ticks) != n || len(l.Warnings) > 0 {
					t.Fatalf("%d ticks: %v, %d listed, warnings %q", n, err, len(l.Ticks), l.Warnings)
				}
				return count.trips.Load(), count.commands.Load()
			}
			trips10, cmds10 := measure(10)
			trips1000, cmds1000 := measure(1000)
			t.Logf("10 ticks: %d round trips, %d commands; 1000 ticks: %d round trips, %d commands", trips10, cmds10, trips1000, cmds1000)
			if trips10 != trips1000 || cmds10 != cmds1000 || trips1000 > tc.trips {
				t.Errorf("round trips %d and %d, commands %d and %d for 10 and 1000 ticks: want the same, at most %d round trips",
					trips10, trips1000, cmds10, cmds1000, tc.trips)
			}
		})
	}
}

// On several lock masters a tick recorded on any one of them is known (a
// "done" on one master says it was dispatched), and with a master down the
// ledger is read from the others, saying what it could not read.
func TestTicksAcrossMasters(t *testing.T) {
	t.Parallel()
	masters := redistest.NewN(t, 3)
	_, _, c, now := ledgerCluster(t, "quorum", "@every 1m", masters...)
	ctx := context.Background()
	base := now.Truncate(time.Minute)
	done, leased := base.Add(-2*time.Minute), base.Add(-time.Minute)
	if err := masters[2].TestClient(t).Set(ctx, scheduler.TickKey("quorum", "r", done), "done", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := masters[1].TestClient(t).Set(ctx, scheduler.TickKey("quorum", "r", leased), "00112233445566778899aabbccddeeff", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	outcomes := func() map[time.Time]baton.Outcome {
		t.Helper()
		l, err := c.Ticks(ctx, "r", done, leased)
		if err != nil {
			t.Fatal(err)
		}
		out := map[time.Time]baton.Outcome{}
		for _, lt := range l.Ticks {
			out[lt.Tick] = lt.Outcome
		}
		if len(l.Warnings) > 0 {
			t.Logf("warnings: %q", l.Warnings)
		}
		return out
	}
	if got := outcomes(); got[done] != baton.OutcomeDispatched || got[leased] != baton.OutcomeDispatching {
		t.Errorf("outcomes %v, want %v dispatched and %v dispatching", got, done, leased)
	}
	if err := masters[0].Stop(); err != nil {
		t.Fatal(err)
	}
	l, err := c.Ticks(ctx, "r", done, leased)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Ticks) != 2 || l.Ticks[0].Outcome != baton.OutcomeDispatched || l.Ticks[1].Outcome != baton.OutcomeDispatching ||
		!slices.ContainsFunc(l.Warnings, func(w string) bool { return strings.Contains(w, "tick records: 1 of 3 lock masters did not answer") }) {
		t.Errorf("with a master down: %+v", l)
	}
}

// Every job's ledger is read in the round trips of one job's: 1 job or 20
// cost the same, each source read once in one pipeline for all of them;
// singletons have no ledger.
func TestTicksAllRoundTripsBounded(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	ctx := context.Background()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	to := now.UTC().Truncate(time.Minute)
	measure := func(jobs int) (int64, int64) {
		ns := fmt.Sprintf("all%d", jobs)
		list := "  - name: pump\n    mode: singleton\n    exec: {command: [\"true\"]}\n"
		for i := range jobs {
			name := fmt.Sprintf("j%d", i)
			list += fmt.Sprintf("  - name: %s\n    schedule: \"@every 1m\"\n    exec: {command: [\"true\"]}\n", name)
			writeHistory(t, rdb, ns, name, run(to.Add(-time.Minute), "run-"+name, time.Second, "ok"))
		}
		cfg, err := config.Load(fmt.Appendf(nil, "redis: {url: \"redis://%s/0\"}\nnamespace: %s\njobs:\n%s", srv.Addr(), ns, list))
		if err != nil {
			t.Fatal(err)
		}
		c := newCluster(t, cfg)
		count := &roundTrips{}
		baton.HookCluster(c, count)
		read := func() []*baton.TickLedger {
			ls, err := c.TicksAll(ctx, to.Add(-59*time.Minute), to)
			if err != nil || len(ls) != jobs {
				t.Fatalf("%d jobs: %v, %d ledgers", jobs, err, len(ls))
			}
			return ls
		}
		read() // the connections' own set-up (HELLO, ...) is not the read's
		count.trips.Store(0)
		count.commands.Store(0)
		for i, l := range read() {
			if l.Job != fmt.Sprintf("j%d", i) || len(l.Ticks) != 60 || l.Ticks[58].Outcome != baton.OutcomeOK || l.Ticks[58].RunID != "run-"+l.Job {
				t.Errorf("ledger of %s: %d ticks, %+v", l.Job, len(l.Ticks), l.Ticks[58])
			}
		}
		return count.trips.Load(), count.commands.Load()
	}
	trips1, cmds1 := measure(1)
	trips20, cmds20 := measure(20)
	t.Logf("1 job: %d round trips, %d commands; 20 jobs: %d round trips, %d commands", trips1, cmds1, trips20, cmds20)
	if trips1 != trips20 || trips20 > 6 {
		t.Errorf("round trips %d for 1 job, %d for 20: want the same, at most 6", trips1, trips20)
	}
}

// A replica's own runs show in the ledger as the history has them: each
// tick it ran failed with the job's exit code, with the replica that ran
// it, its attempt and a fence that grows from tick to tick, in tick order.
func TestTicksOfARunningReplica(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: live
jobs:
  - name: flaky
    schedule: "@every 1s"
    max_retry: 0
    exec: {command: ["sh", "-c", "exit 7"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, cfg)
	running(t, cfg, baton.WithReplicaID("live-1"))
	failed := failedTicks(t, c, "flaky", 3)
	for i, lt := range failed {
		if lt.Status != "failed" || lt.ExitCode == nil || *lt.ExitCode != 7 || lt.Worker != "live-1" || lt.Dispatcher != "live-1" ||
			lt.Attempt != 1 || lt.Fence <= 0 || lt.RunID == "" || lt.Started.IsZero() || lt.Ended.Before(lt.Started) || lt.Manual || lt.Backfill {
			t.Errorf("failed tick %+v", lt)
		}
		if i > 0 && (!lt.Tick.After(failed[i-1].Tick) || lt.Fence <= failed[i-1].Fence) {
			t.Errorf("tick %v (fence %d) after %v (fence %d): want later ticks with higher fences", lt.Tick, lt.Fence, failed[i-1].Tick, failed[i-1].Fence)
		}
	}
}

// A paused job's ticks show paused with the pause's note; a backfill of
// one of them runs it, and the ledger then shows it ran, marked backfill
// (the worker's history events say so).
func TestTicksShowABackfilledPausedTick(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: refill
jobs:
  - name: b
    schedule: "@every 1s"
    concurrency: allow
    exec: {command: ["true"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, cfg)
	ctx := context.Background()
	if res, err := c.Pause(ctx, "b", baton.PauseNote{By: "alice", Note: "db migration"}); err != nil || !res.InEffect {
		t.Fatalf("pause: %+v %v", res, err)
	}
	running(t, cfg)
	var paused baton.LedgerTick
	poll.Require(t, 20*time.Second, "a paused tick in the ledger", func() bool {
		l, err := c.Ticks(ctx, "b", time.Time{}, time.Time{})
		if err != nil {
			return false
		}
		for _, lt := range l.Ticks {
			if lt.Outcome == baton.OutcomePaused && lt.Status == "paused" {
				paused = lt
				return true
			}
		}
		return false
	})
	if paused.Pause == nil || paused.Pause.By != "alice" || paused.Pause.Note != "db migration" {
		t.Errorf("paused tick %+v: want alice's pause and note", paused)
	}
	plan, err := c.Backfill(ctx, "b", paused.Tick, paused.Tick, false)
	if err != nil || len(plan.Dispatched) != 1 {
		t.Fatalf("backfill of %v: %+v %v", paused.Tick, plan, err)
	}
	poll.Require(t, 20*time.Second, "the backfilled tick ran", func() bool {
		l, err := c.Ticks(ctx, "b", paused.Tick, paused.Tick)
		if err != nil || len(l.Ticks) != 1 {
			return false
		}
		lt := l.Ticks[0]
		if lt.Outcome != baton.OutcomeOK {
			return false
		}
		if !lt.Backfill || lt.Pause != nil || lt.RunID == "" {
			t.Errorf("backfilled tick %+v: want marked backfill, with its run", lt)
		}
		recs, err := c.History(ctx, "b", 0)
		if err != nil || !slices.ContainsFunc(recs, func(r jobs.RunRecord) bool { return r.RunID == lt.RunID && r.Backfill }) {
			t.Errorf("the history has no record of run %s marked backfill: %v %+v", lt.RunID, err, recs)
		}
		return true
	})
}

// A tick whose run the history no longer keeps (history.runs trimmed it)
// but whose tick record ("done") is still on the lock masters ran, or not,
// before what the history tells: it is unknown, not "dispatched; no run
// recorded yet", which says it has not started.
func TestTicksATickWhoseRunWasTrimmedIsUnknownNotDispatched(t *testing.T) {
	t.Parallel()
	const ns = "trimmed"
	rdb, _, c, now := ledgerCluster(t, ns, "@every 1m")
	ctx := context.Background()
	base := now.Truncate(time.Minute)
	ago := func(m int) time.Time { return base.Add(-time.Duration(m) * time.Minute) }
	// the history keeps only the newest run: those of ago(4)..ago(2) were
	// trimmed; their tick records (within the 5m starting deadline and
	// margins) say "done"
	writeHistory(t, rdb, ns, "r", run(ago(1), "run-1", time.Second, "ok", "exit_code", 0))
	for _, at := range []time.Time{ago(4), ago(3), ago(2)} {
		if err := rdb.Set(ctx, scheduler.TickKey(ns, "r", at), "done", time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Ticks(ctx, "r", ago(4), ago(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range l.Ticks {
		if lt.Tick.Equal(ago(1)) {
			if lt.Outcome != baton.OutcomeOK {
				t.Errorf("tick %v: %s, want ok", lt.Tick, lt.Outcome)
			}
			continue
		}
		if lt.Outcome != baton.OutcomeUnknown {
			t.Errorf("tick %v, before the history's oldest entry (%v) and trimmed from it: %s (%q), want unknown (known_from %v)",
				lt.Tick, ago(1).Add(100*time.Millisecond), lt.Outcome, lt.Reason, l.KnownFrom)
		}
	}
}

// The ledger of a short window reads from the history what that window
// needs, not the job's whole history: the dashboard's grid reads every
// job's ledger every few seconds, and history.runs may keep up to 100,000
// runs of each. Measured as the bytes the queue Redis sends.
func TestTicksReadsTheHistoryOnlyAsFarAsItsWindow(t *testing.T) {
	t.Parallel()
	const ns = "bounded"
	rdb, _, c, now := ledgerCluster(t, ns, "@every 1m")
	ctx := context.Background()
	base := now.Truncate(time.Minute)
	// 5,000 runs, one a second, ending two days ago; written 500 at a
	// time (one pipeline of them all is megabytes, whose write outlasts
	// the client's write timeout on a loaded host)
	old := base.Add(-48 * time.Hour)
	for from := 0; from < 5000; from += 500 {
		pipe := rdb.Pipeline()
		for i := from; i < from+500; i++ {
			at := old.Add(time.Duration(i-5000) * time.Second)
			for k, e := range run(at, fmt.Sprintf("run-%d", i), 10*time.Millisecond, "ok", "exit_code", 0) {
				pipe.XAdd(ctx, &redis.XAddArgs{Stream: ns + ":{history:r}", ID: fmt.Sprintf("%d-%d", e.at.UnixMilli(), k+1), Values: append([]any{"v", "1"}, e.fields...)})
			}
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	writeHistory(t, rdb, ns, "r", run(base.Add(-time.Minute), "run-last", time.Second, "ok", "exit_code", 0))
	sent := func() int64 {
		info, err := rdb.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_net_output_bytes:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no total_net_output_bytes in INFO stats")
		return 0
	}
	before := sent()
	l, err := c.Ticks(ctx, "r", base.Add(-5*time.Minute), base)
	if err != nil {
		t.Fatal(err)
	}
	read := sent() - before
	if len(l.Ticks) != 6 {
		t.Errorf("%d ticks, want 6", len(l.Ticks))
	}
	if read > 64<<10 {
		t.Errorf("a ledger of 6 ticks read %d bytes from the queue Redis: the whole history of 5,000 runs two days old", read)
	}
}

// All jobs' ledgers together are bounded too: a window that holds more
// than MaxLedgerTicksAll ticks of all jobs is refused, though each job's
// share is within MaxLedgerTicks.
func TestTicksAllRefusesATooLargeWindowOfAllJobs(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	var jobsYAML strings.Builder
	for i := range 11 {
		fmt.Fprintf(&jobsYAML, "  - {name: j%d, schedule: \"@every 1s\", exec: {command: [\"true\"]}}\n", i)
	}
	cfg, err := config.Load(fmt.Appendf(nil, "redis: {url: \"redis://%s/0\"}\njobs:\n%s", srv.Addr(), jobsYAML.String()))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, cfg)
	to := time.Now().UTC().Truncate(time.Second)
	from := to.Add(-(baton.MaxLedgerTicks - 1) * time.Second)
	if _, err := c.TicksAll(context.Background(), from, to); !errors.Is(err, baton.ErrTickWindow) || !strings.Contains(err.Error(), strconv.Itoa(baton.MaxLedgerTicksAll)) {
		t.Fatalf("TicksAll over 11 jobs x %d ticks: %v, want ErrTickWindow naming the limit", baton.MaxLedgerTicks, err)
	}
	if _, err := c.Ticks(context.Background(), "j0", from, to); err != nil {
		t.Fatalf("one job's window of %d ticks: %v", baton.MaxLedgerTicks, err)
	}
}

// newCluster is a Cluster of cfg, closed at the test's end.
func newCluster(t *testing.T, cfg *config.Config) *baton.Cluster {
	t.Helper()
	c, err := baton.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A runtime schedule's ledger is read by its job name ("@" + id), as a
// listed job's; TicksAll gives the job list's only (a listing of every
// runtime schedule's ticks would have no bound).
func TestTicksOfARuntimeSchedule(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: rt
jobs:
  - name: listed
    schedule: "0 0 1 1 *"
    exec: {command: ["true"]}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, cfg)
	ctx := context.Background()
	reg := jobs.NewRegistry()
	if err := reg.HandleFunc("flaky", func(context.Context, jobs.Run) error { return errors.New("tenant down") }); err != nil {
		t.Fatal(err)
	}
	running(t, cfg, baton.WithReplicaID("rt-1"), baton.WithHandlers(reg))
	zero := 0
	s, err := c.PutSchedule(ctx, "tenant/42", baton.ScheduleSpec{Schedule: "@every 1s", Handler: "flaky", MaxRetry: &zero})
	if err != nil {
		t.Fatal(err)
	}
	failed := failedTicks(t, c, s.Job, 2)
	for _, lt := range failed {
		if lt.Worker != "rt-1" || !strings.Contains(lt.Reason, "tenant down") || lt.Tick.Before(s.Created.Truncate(time.Second)) {
			t.Errorf("failed tick %+v: want run by rt-1, failed with the handler's error, not before the put %s", lt, s.Created)
		}
	}
	all, err := c.TicksAll(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Job != "listed" {
		t.Fatalf("TicksAll gave %d ledgers (first %q): want the job list's one", len(all), all[0].Job)
	}
}

// failedTicks waits until job's ledger has at least n failed ticks and
// returns them.
func failedTicks(t *testing.T, c *baton.Cluster, job string, n int) []baton.LedgerTick {
	t.Helper()
	var failed []baton.LedgerTick
	poll.Require(t, 20*time.Second, fmt.Sprintf("%d failed ticks in %s's ledger", n, job), func() bool {
		l, err := c.Ticks(context.Background(), job, time.Time{}, time.Time{})
		if err != nil {
			t.Logf("ticks: %v", err)
			return false
		}
		failed = nil
		for _, lt := range l.Ticks {
			if lt.Outcome == baton.OutcomeFailed {
				failed = append(failed, lt)
			}
		}
		return len(failed) >= n
	})
	return failed
}

// A run recorded running is running while any roster entry of its worker's
// replica id lives and began before the run: a replica id has an entry per
// worker, and neither the dead entry of its previous process (kept ten
// minutes) nor the new worker of a config reload in the same process (begun
// after the run) makes the run of the live, earlier worker unknown.
func TestTicksRunOfALiveWorkerBesideItsIDsOtherEntriesIsRunning(t *testing.T) {
	t.Parallel()
	const ns = "ledgerids"
	rdb, _, c, now := ledgerCluster(t, ns, "@every 1m")
	ctx := context.Background()
	base := now.Truncate(time.Minute)
	ago := func(m int) time.Time { return base.Add(-time.Duration(m) * time.Minute) }
	entry := func(seen, started time.Time) string {
		return fmt.Sprintf(`%d {"v":2,"started_ms":%d,"version":"t","role":"run","queues":["default"],"hash":"h"}`, seen.UnixMilli(), started.UnixMilli())
	}
	key := "{" + ns + ":roster}"
	var evs []historyEvent
	for k := 1; k <= 6; k++ { // replica wK runs the tick of ago(K), not ended
		w, tick := "w"+strconv.Itoa(k), ago(k)
		evs = append(evs, historyEvent{tick.Add(100 * time.Millisecond), []any{"ev", "started", "tick", tick.Format(time.RFC3339Nano),
			"run", "run-" + w, "replica", w, "attempt", 1, "fence", 7, "by", "s1"}})
		// the live worker that runs it, a config reload's new worker (begun
		// after the run), the previous process's dead entry
		for _, f := range [][2]string{
			{w + "#live", entry(now, ago(10))},
			{w + "#reload", entry(now, tick.Add(30*time.Second))},
			{w + "#dead", entry(now.Add(-time.Minute), ago(30))},
		} {
			if err := rdb.HSet(ctx, key, f[0], f[1]).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// w7's run: its only entries are dead or begun after it, so it is gone
	evs = append(evs, historyEvent{ago(7).Add(100 * time.Millisecond), []any{"ev", "started", "tick", ago(7).Format(time.RFC3339Nano),
		"run", "run-w7", "replica", "w7", "attempt", 1, "fence", 7, "by", "s1"}})
	if err := rdb.HSet(ctx, key, "w7#reload", entry(now, ago(7).Add(30*time.Second)), "w7#dead", entry(now.Add(-time.Minute), ago(30))).Err(); err != nil {
		t.Fatal(err)
	}
	writeHistory(t, rdb, ns, "r", evs)
	l, err := c.Ticks(ctx, "r", ago(8), base)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, lt := range l.Ticks {
		if lt.Worker == "" {
			continue
		}
		n++
		if lt.Worker == "w7" {
			if lt.Outcome != baton.OutcomeUnknown || !strings.Contains(lt.Reason, "started again") {
				t.Errorf("the run of w7, whose entries are dead or begun after it, is %s (%s), want unknown", lt.Outcome, lt.Reason)
			}
			continue
		}
		if lt.Outcome != baton.OutcomeRunning {
			t.Errorf("the run of live worker %s is %s (%s), want running", lt.Worker, lt.Outcome, lt.Reason)
		}
	}
	if n != 7 {
		t.Fatalf("%d runs in the ledger, want 7: %+v", n, l.Ticks)
	}
	// the history says what the ledger says: w7's run is unknown, not
	// running until newer runs trim it
	recs, err := c.History(ctx, "r", 0)
	if err != nil || len(recs) != 7 {
		t.Fatalf("history: %d records (%v), want 7", len(recs), err)
	}
	for _, r := range recs {
		want := jobs.StatusRunning
		if r.Worker == "w7" {
			want = jobs.StatusUnknown
		}
		if r.Status != want || (want == jobs.StatusUnknown) != strings.Contains(r.Reason, "started again") {
			t.Errorf("history: the run of %s is %s (%q), want %s", r.Worker, r.Status, r.Reason, want)
		}
	}
}

// A tick due before the deployment's first replica started, with no record
// of it and past its starting deadline, is not called missed: nothing could
// dispatch it (within its deadline it is due: a replica may catch it up).
func TestTicksBeforeTheDeploymentAreNotMissed(t *testing.T) {
	t.Parallel()
	rdb, _, c, now := ledgerCluster(t, "dep", "@every 10s") // ticks dense enough for every window below
	ctx := context.Background()
	deployed := now.Add(-150 * time.Second)
	if err := rdb.Set(ctx, "dep:deployed", deployed.UnixMilli(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	// a tick record the lock masters keep: the ledger knows the records'
	// retention (about 6 minutes back)
	recorded := now.Truncate(10 * time.Second).Add(-time.Minute)
	if err := rdb.Set(ctx, fmt.Sprintf("dep:{r}:tick:%d", recorded.UnixMilli()), "done", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.Ticks(ctx, "r", now.Add(-15*time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	before := 0
	for _, lt := range l.Ticks {
		isBefore := strings.Contains(lt.Reason, "before the deployment's first replica started")
		switch {
		case !lt.Tick.Before(l.KnownFrom) && lt.Tick.Before(deployed) && lt.Tick.Add(5*time.Minute).Before(l.Now): // past its deadline
			if lt.Outcome != baton.OutcomeUnknown || !isBefore {
				t.Errorf("tick %v before the deployment: %s %q", lt.Tick, lt.Outcome, lt.Reason)
			}
			before++
		case isBefore:
			t.Errorf("tick %v (deployed %v, known from %v): %s %q", lt.Tick, deployed, l.KnownFrom, lt.Outcome, lt.Reason)
		}
	}
	if before == 0 {
		t.Fatalf("no tick between the records' retention (%v) and the deployment (%v): %+v", l.KnownFrom, deployed, l.Ticks)
	}
}

// A lock master restarted empty holds tick records from its birth only: a
// tick before it without a record is not known, not missed (the ticks the
// lost records told of ran, or did not).
func TestTicksBeforeTheMastersBirthAreNotMissed(t *testing.T) {
	t.Parallel()
	rdb, cfg, c, now := ledgerCluster(t, "born", "@every 10s")
	ctx := context.Background()
	// the master's marker (docs/operating.md's formats): born 90 s ago, as
	// if it had restarted empty then
	key := wiring.LockPrefix(cfg) + "marker"
	marker := fmt.Sprintf("0123456789abcdef 1 %d empty", now.Add(-90*time.Second).UnixMilli())
	if err := rdb.Set(ctx, key, marker, 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.Ticks(ctx, "r", now.Add(-15*time.Minute), now)
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range l.Ticks {
		if lt.Outcome == baton.OutcomeMissed {
			t.Errorf("tick %v before the master's birth called missed: %q (known from %v)", lt.Tick, lt.Reason, l.KnownFrom)
		}
	}
	if want := now.Add(-90 * time.Second); l.KnownFrom.Sub(want).Abs() > time.Second {
		t.Errorf("known from %v, want the master's birth %v", l.KnownFrom, want)
	}
}

// A tick the lock masters recorded missed (a replica came to it after its
// starting deadline: the masters in their restart quarantine, replicas
// down) or paused, with no history event of it, says why.
func TestTicksRecordedMissedOrPausedSayWhy(t *testing.T) {
	t.Parallel()
	rdb, cfg, c, now := ledgerCluster(t, "why", "@every 10s")
	ctx := context.Background()
	j, _ := cfg.Job("r")
	missed := now.Add(-j.StartingDeadline - 10*time.Second).Truncate(10 * time.Second)
	paused := missed.Add(-10 * time.Second)
	for at, v := range map[time.Time]string{missed: "missed", paused: "paused"} {
		if err := rdb.Set(ctx, scheduler.TickKey("why", "r", at), v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Ticks(ctx, "r", paused, missed)
	if err != nil || len(l.Ticks) != 2 {
		t.Fatalf("ledger: %+v %v", l, err)
	}
	for _, lt := range l.Ticks {
		want, why := baton.OutcomeMissed, fmt.Sprintf("recorded missed: a replica came to it after its starting deadline (%s)", j.StartingDeadline)
		if lt.Tick.Equal(paused) {
			want, why = baton.OutcomePaused, "recorded paused"
		}
		if lt.Outcome != want || !strings.Contains(lt.Reason, why) {
			t.Errorf("tick %v: %s %q, want %s saying %q", lt.Tick, lt.Outcome, lt.Reason, want, why)
		}
	}
}

// A tick the lock masters alone recorded missed while still within its
// starting deadline was left out by the job's catch-up policy (a catch-up
// claims the ticks it leaves out as dropped, which records them missed),
// and the history that would say so was not written (the queue Redis
// failing then, as it does when a catch-up follows an outage): its reason
// says so, not that a replica came to it after its deadline.
func TestTicksRecordedMissedWithinTheirDeadlineSayTheCatchUpLeftThemOut(t *testing.T) {
	t.Parallel()
	rdb, cfg, c, now := ledgerCluster(t, "leftout", "@every 10s")
	ctx := context.Background()
	j, _ := cfg.Job("r")
	left := now.Add(-time.Minute).Truncate(10 * time.Second) // well within its 5m deadline
	if err := rdb.Set(ctx, scheduler.TickKey("leftout", "r", left), "missed", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.Ticks(ctx, "r", left, left)
	if err != nil || len(l.Ticks) != 1 {
		t.Fatalf("ledger: %+v %v", l, err)
	}
	lt := l.Ticks[0]
	if lt.Outcome != baton.OutcomeMissed || strings.Contains(lt.Reason, "after its starting deadline") ||
		!strings.Contains(lt.Reason, "catch-up policy "+string(j.Catchup)) {
		t.Errorf("tick %v, %s within its deadline (%s): %s %q, want missed, left out by the catch-up policy %s",
			lt.Tick, now.Sub(left), j.StartingDeadline, lt.Outcome, lt.Reason, j.Catchup)
	}
}

// A job whose history holds an entry baton did not write gets the warning
// in its own ledger, not in every job's of the same read.
func TestACorruptHistoryWarnsOnlyItsOwnJobsLedger(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg, err := config.Load(fmt.Appendf(nil, `redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: lw
jobs:
  - {name: a, schedule: "@every 1m", exec: {command: ["true"]}}
  - {name: b, schedule: "@every 1m", exec: {command: ["true"]}}
`, srv.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	c := openCluster(t, cfg)
	ctx := context.Background()
	if err := srv.TestClient(t).XAdd(ctx, &redis.XAddArgs{Stream: runlog.Key("lw", "a"), Values: []any{"ev", "finished", "tick", "yesterday", "run", "r1", "status", "ok"}}).Err(); err != nil {
		t.Fatal(err)
	}
	ls, err := c.TicksAll(ctx, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		warned := len(l.Warnings) > 0
		if warned != (l.Job == "a") {
			t.Errorf("job %s's ledger warnings %q: want the corrupt history's warning on job a's alone", l.Job, l.Warnings)
		}
	}
}
