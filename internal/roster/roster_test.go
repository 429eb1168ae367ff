package roster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/formats"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/worktest"
	"github.com/batonhq/baton/jobs"
)

// A roster entry carries its format version beside the member's fields, and
// reads back as the member (an older replica reads it alike: it ignores "v").
func TestRosterEntryCarriesFormatVersion(t *testing.T) {
	m := Member{ID: "a", Version: "v1.2.3", Role: "run", Queues: []string{"baton:default"}, Hash: "0123456789ab", SkewMS: -3,
		MaxRuns: map[string]int{"capped": 5}}
	b, err := json.Marshal(rosterEntry{V: formats.RosterEntry, Member: m})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":2,"version":"v1.2.3","role":"run","queues":["baton:default"],"hash":"0123456789ab","skew_ms":-3,"max_runs":{"capped":5}}`
	if string(b) != want {
		t.Fatalf("entry\n got %s\nwant %s", b, want)
	}
	var back Member
	if err := json.Unmarshal(b, &back); err != nil || back.Version != m.Version || back.Hash != m.Hash || back.SkewMS != m.SkewMS {
		t.Fatalf("read back as %+v, %v", back, err)
	}
}

// Two live processes under one replica id are both warned about, naming the
// id, once per other process; two workers of one process under one id (a config reload)
// are not a duplicate.
func TestRosterWarnsAboutTwoProcessesWithOneID(t *testing.T) {
	// the queue Redis's clock moves on between beats, as it does between
	// processes' heartbeats (seconds apart): beats in one millisecond do
	// not tell that two processes ran together
	clock := redistest.NewTestClock(t)
	e := worktest.NewEnv(t, redistest.WithClock(clock))
	cfg := e.Config(t, `  - name: x
    schedule: "@every 1m"
    handler: {name: x}
`)
	ctx := context.Background()
	mineLog, otherLog := &worktest.Logs{}, &worktest.Logs{}
	mine := New(e.RDB, cfg, Member{ID: "dup", Role: "run", Queues: []string{"default"}}, mineLog.Logger())
	reload := New(e.RDB, cfg, Member{ID: "dup", Role: "run", Queues: []string{"default"}}, mineLog.Logger())
	beat := func(r *Roster) []Member {
		t.Helper()
		if err := clock.Step(5 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		ms, err := r.Beat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r.WarnDuplicate(ms)
		return ms
	}
	beat(mine)
	if ms := beat(reload); len(ms) != 2 || DuplicateIDs(ms) != nil || mineLog.Count("another live process") != 0 {
		t.Fatalf("two workers of one process: duplicates %v, members %+v\n%s", DuplicateIDs(ms), ms, mineLog.String())
	}

	other := New(e.RDB, cfg, Member{ID: "dup", Role: "worker", Queues: []string{"default"}, Process: "another-process"}, otherLog.Logger())
	// each has beaten since the other's first heartbeat: both run now
	beat(other)
	beat(mine)
	ms := beat(other)
	if got := DuplicateIDs(ms); !slices.Equal(got, []string{"dup"}) {
		t.Errorf("DuplicateIDs %v, want [dup]", got)
	}
	if otherLog.Count(`another live process runs under this replica id`) != 1 || !strings.Contains(otherLog.String(), `"replica":"dup"`) {
		t.Errorf("the second process did not warn once, naming the id:\n%s", otherLog.String())
	}
	for range 2 {
		beat(mine)
		beat(other)
	}
	// once per other process, however many entries it has
	if n := mineLog.Count("another live process runs under this replica id"); n != 1 {
		t.Errorf("the first process warned %d times, want once:\n%s", n, mineLog.String())
	}
	if n := otherLog.Count("another live process runs under this replica id"); n != 1 {
		t.Errorf("the second process warned %d times, want once:\n%s", n, otherLog.String())
	}
}

// Schedule: a process dies without leaving the roster (killed, crashed) and
// is restarted at once under the same replica id, while its entry still
// counts as live. The dead entry never beat while the new process ran:
// that is a restart, not two processes under one id, and neither the new
// process nor the status warns.
func TestRosterRestartUnderOneIDIsNoDuplicate(t *testing.T) {
	e := worktest.NewEnv(t)
	cfg := e.Config(t, `  - name: x
    schedule: "@every 1m"
    handler: {name: x}
`)
	ctx := context.Background()
	deadLog, newLog := &worktest.Logs{}, &worktest.Logs{}
	dead := New(e.RDB, cfg, Member{ID: "one", Role: "run", Queues: []string{"default"}, Process: "crashed"}, deadLog.Logger())
	for range 2 {
		if _, err := dead.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	restarted := New(e.RDB, cfg, Member{ID: "one", Role: "run", Queues: []string{"default"}, Process: "restarted"}, newLog.Logger())
	for range 3 {
		ms, err := restarted.Beat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		restarted.WarnDuplicate(ms)
		if live := slices.IndexFunc(ms, func(m Member) bool { return m.Process == "crashed" && m.Live }); live < 0 {
			t.Fatalf("the dead process's entry is not live any more: %+v", ms)
		}
		if got := DuplicateIDs(ms); got != nil {
			t.Fatalf("DuplicateIDs %v after a restart under one id", got)
		}
	}
	if n := newLog.Count("another live process"); n != 0 {
		t.Fatalf("the restarted process warned of its dead predecessor:\n%s", newLog.String())
	}
}

// A step of the queue Redis's clock, forward or back, by 30 s or beyond the
// forget window, drops no live member and makes none look dead: the first
// heartbeat after it sees the step, keeps every member, and every reader
// (the replicas and a one-shot Read) counts them live until a
// heartbeat round has passed under the new clock; then a member that
// stopped before the step is dead again.
func TestQueueClockStepKeepsLiveMembers(t *testing.T) {
	for _, step := range []time.Duration{30 * time.Second, -30 * time.Second, 15 * time.Minute, -15 * time.Minute} {
		t.Run(step.String(), func(t *testing.T) {
			ctx := context.Background()
			clock := redistest.NewTestClock(t)
			srv := redistest.New(t, redistest.WithClock(clock))
			rdb := srv.TestClient(t)
			e := &worktest.Env{Srv: srv}
			cfgA := e.Config(t, "  - {name: a, schedule: \"@every 1m\", handler: {name: a}}\n")
			cfgB := e.Config(t, "  - {name: b, schedule: \"@every 1m\", handler: {name: b}}\n")
			a := New(rdb, cfgA, Member{ID: "a", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
			b := New(rdb, cfgB, Member{ID: "b", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
			gone := New(rdb, cfgB, Member{ID: "gone", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
			for _, r := range []*Roster{gone, a, b, a} { // a beats twice: it has a reading to compare with
				if _, err := r.Beat(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// gone stopped long before the step (its entry says so)
			entry, err := rdb.HGet(ctx, Keys("baton")[0], gone.self.key).Result()
			if err != nil {
				t.Fatal(err)
			}
			_, js, _ := strings.Cut(entry, " ")
			old := time.Now().Add(clock.Offset() - time.Minute).UnixMilli()
			if err := rdb.HSet(ctx, Keys("baton")[0], gone.self.key, strconv.FormatInt(old, 10)+" "+js).Err(); err != nil {
				t.Fatal(err)
			}

			if err := clock.Step(step); err != nil {
				t.Fatal(err)
			}
			live := func(what string, ms []Member, want ...string) {
				t.Helper()
				var got []string
				for _, m := range ms {
					if m.Live {
						got = append(got, m.ID)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: live members %v, want %v", what, got, want)
				}
			}
			// before any heartbeat sees the step, a forward one shows no
			// live member at all, the reader's own entry neither: stale,
			// so no decision is made off it
			ms, err := Read(ctx, rdb, "baton")
			if err != nil {
				t.Fatal(err)
			}
			if got := Stale(ms); got != (step > LiveWindow) {
				t.Errorf("a read before the first heartbeat after a step of %v: stale %v", step, got)
			}
			ms, err = a.Beat(ctx) // the first heartbeat after the step
			if err != nil {
				t.Fatal(err)
			}
			live("a's first heartbeat after the step", ms, "a", "b", "gone")
			ms, stepped, err := a.read(ctx)
			if err != nil || !stepped {
				t.Fatalf("a's read after the step: stepped %v, %v", stepped, err)
			}
			live("a's read", ms, "a", "b", "gone")
			ms, err = Read(ctx, rdb, "baton")
			if err != nil {
				t.Fatal(err)
			}
			live("a one-shot read", ms, "a", "b", "gone")
			if _, err := b.Beat(ctx); err != nil {
				t.Fatal(err)
			}
			ttl, err := rdb.PTTL(ctx, Keys("baton")[2]).Result()
			if err != nil || ttl <= 0 || ttl > StepSuspend {
				t.Fatalf("the step is recorded for %v (%v), want up to %v", ttl, err, StepSuspend)
			}

			// a heartbeat round later (the record expires): verdicts again
			if err := rdb.Del(ctx, Keys("baton")[2]).Err(); err != nil {
				t.Fatal(err)
			}
			ms, err = a.Beat(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"a", "b"}
			if step < -time.Minute {
				// seen "in the future": counted live until the clock gets there
				want = append(want, "gone")
			}
			live("a's heartbeat a round after the step", ms, want...)
		})
	}
}

// A roster entry or job list that does not decode is left out and reported,
// naming the key and the member or list, never read as a replica gone or
// listing no jobs; the members that decode still come.
func TestCorruptRosterEntryIsReported(t *testing.T) {
	e := worktest.NewEnv(t)
	cfg := e.Config(t, "  - name: j\n    schedule: \"@every 1m\"\n    handler: {name: j}\n")
	ctx := context.Background()
	r := New(e.RDB, cfg, Member{ID: "good", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
	if _, err := r.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	members, lists := Keys("baton")[0], Keys("baton")[1]
	for _, tc := range []struct{ key, field, value, names string }{
		{members, "ghost", "abc", `member "ghost"`},
		{members, "ghost", "9223372036854775807 {}", `member "ghost"`},
		{lists, r.self.Hash, "[1, 2]", `list "` + r.self.Hash + `"`},
	} {
		if err := e.RDB.HSet(ctx, tc.key, tc.field, tc.value).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := Read(ctx, e.RDB, "baton")
		var ce *jobs.CorruptError
		if !errors.Is(err, jobs.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != tc.key || ce.Field != tc.names {
			t.Fatalf("roster with %s = %q: %v, want ErrCorrupt naming %q and %s", tc.field, tc.value, err, tc.key, tc.names)
		}
		if i := slices.IndexFunc(got, func(m Member) bool { return m.ID == "good" }); i < 0 || !got[i].Live {
			t.Fatalf("roster with %s = %q: %+v, want the good member live", tc.field, tc.value, got)
		}
		if err := e.RDB.HDel(ctx, members, "ghost").Err(); err != nil {
			t.Fatal(err)
		}
		if tc.key == lists {
			if err := e.RDB.HDel(ctx, lists, tc.field).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Beat(ctx); err != nil { // stores the list again
				t.Fatal(err)
			}
		}
	}
}

// A worker runs tasks from its start whether its first heartbeat landed or
// not (worker.Start goes on past a failed beat). Its Started, by which a
// reader tells a run of its previous process from its own (a run begun
// before every live entry of its id started is taken as gone), is no later
// than a run it began while its first heartbeat failed: not the time of the
// first heartbeat that landed.
func TestStartedIsNotAfterARunBegunWhileTheFirstBeatFailed(t *testing.T) {
	e := worktest.NewEnv(t)
	cfg := e.Config(t, `  - name: x
    schedule: "@every 1m"
    handler: {name: x}
`)
	ctx := context.Background()
	key := Keys(cfg.Namespace)[0]
	// the first heartbeat fails: the roster's key holds no hash
	if err := e.RDB.Set(ctx, key, "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r := New(e.RDB, cfg, Member{ID: "w", Role: "run", Queues: []string{"default"}}, worktest.Logger(t))
	if _, err := r.Beat(ctx); err == nil {
		t.Fatal("the first heartbeat landed on a key that holds no hash")
	}
	// the worker begins a run meanwhile: its start, by the queue Redis's clock
	begun, err := e.RDB.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := e.RDB.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second heartbeat publishes Started
		if _, err := r.Beat(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := Read(ctx, e.RDB, cfg.Namespace)
	if err != nil || len(ms) != 1 || ms[0].Started.IsZero() {
		t.Fatalf("roster %+v, %v: want w, with its start", ms, err)
	}
	if ms[0].Started.After(begun) {
		t.Fatalf("w started at %v by the roster, after the run it began at %v (its first heartbeat failed): a reader takes the run for its previous process's",
			ms[0].Started.UTC(), begun.UTC())
	}
}

// An entry of a roster entry format newer than this release reads (a
// replica of a later release) is not read as this release's: its replica
// counts as live while it beats, with its job list, queues and limits
// unknown, and a task this replica cannot run is handed back to it rather
// than archived for want of a runner. The process says so once, naming
// the format, the version met and the version it reads.
func TestRosterEntryOfANewerFormatCountsLiveWithItsListUnknown(t *testing.T) {
	formats.Forget("roster entry") // logged once per process: again for this test
	e := worktest.NewEnv(t)
	cfg := e.Config(t, "  - name: j\n    schedule: \"@every 1m\"\n    handler: {name: j}\n")
	ctx := context.Background()
	var logs worktest.Logs
	r := New(e.RDB, cfg, Member{ID: "old", Role: "run", Queues: []string{"default"}}, logs.Logger())
	if _, err := r.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	now, err := e.RDB.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	newer := formats.RosterEntry + 1
	// its members may mean something else: a list hash this replica knows,
	// queues it does not consume, max_runs as a number
	entry := fmt.Sprintf(`%d {"v":%d,"version":"9.0.0","role":"run","queues":7,"hash":%q,"max_runs":3}`, now.UnixMilli(), newer, r.self.Hash)
	if err := e.RDB.HSet(ctx, Keys("baton")[0], "next#1", entry).Err(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got, err := Read(ctx, e.RDB, "baton")
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(got, func(m Member) bool { return m.ID == "next" })
		if i < 0 {
			t.Fatalf("the newer entry is not in the roster: %+v", got)
		}
		if m := got[i]; !m.Live || m.Newer != newer || m.Jobs != nil || m.Queues != nil || m.LimitsKnown || m.Version != "" {
			t.Fatalf("the newer entry reads %+v: want live, Newer %d, its list, queues, limits and version unknown", m, newer)
		}
		for _, task := range []Task{{Job: "not-in-any-list"}, {Job: "@tenant", URL: "https://hooks.example/x"}} {
			ids, undecided, err := r.Runners(ctx, task, "default")
			if err != nil || undecided || !slices.Equal(ids, []string{"next"}) {
				t.Fatalf("runners of %+v: %v, %v, %v; want the newer replica (handed back, not archived)", task, ids, undecided, err)
			}
		}
	}
	if n := logs.Count("in a format newer than this replica reads: upgrade this replica"); n != 1 {
		t.Fatalf("%d lines about the newer entry, want 1:\n%s", n, logs.String())
	}
	l := logs.All()[slices.IndexFunc(logs.All(), func(l map[string]any) bool { return l["format"] != nil })]
	if l["format"] != "roster entry" || l["version"] != float64(newer) || l["reads"] != float64(formats.RosterEntry) {
		t.Fatalf("the line says %v", l)
	}
}

// A process restarted under its id whose first heartbeat's reply was slow
// (its Started, estimated from that reply, falls before its predecessor's
// last beat) does not overlap its dead predecessor: its first heartbeat
// landed after that last beat. Two processes whose beats interleave do.
func TestASlowFirstHeartbeatDoesNotMakeARestartADuplicate(t *testing.T) {
	x := time.UnixMilli(1_800_000_000_000)
	dead := Member{ID: "one", Process: "crashed", Live: true, Started: x.Add(-time.Minute), FirstSeen: x.Add(-time.Minute), Seen: x}
	restarted := Member{ID: "one", Process: "restarted", Live: true, Started: x.Add(-5 * time.Millisecond), FirstSeen: x.Add(time.Millisecond), Seen: x.Add(2 * time.Second)}
	if duplicates(dead, restarted) || DuplicateIDs([]Member{dead, restarted}) != nil {
		t.Errorf("a restart whose first heartbeat landed after its predecessor's last is taken for a duplicate")
	}
	both := restarted
	both.FirstSeen = x.Add(-time.Second) // it beat before the other's last beat
	if !duplicates(dead, both) {
		t.Errorf("two processes whose heartbeats interleave are not taken for duplicates")
	}
}
