package schedstore

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/handoff"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// putCalendar puts calendar name into st as a caller does.
func putCalendar(t *testing.T, st *Store, name, doc string) Record {
	t.Helper()
	_, stored, err := config.DecodeCalendar(name, []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Put(context.Background(), CalendarID(name), stored, Any)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ticks are the next n ticks of job j after from, as dates.
func ticks(j *config.Job, from time.Time, n int) string {
	var out []string
	for t := j.Sched.Next(from); len(out) < n && !t.IsZero(); t = j.Sched.Next(t) {
		out = append(out, t.Format(time.DateOnly))
	}
	return strings.Join(out, " ")
}

func (a *applied) job(name string) *config.Job {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.jobs[name]
}

const dailyAtNine = `{schedule: "0 9 * * *", timezone: UTC, exclude: [holidays], handler: {name: h}}`

var dec23 = time.Date(2026, 12, 23, 10, 0, 0, 0, time.UTC)

// withCalendar starts a Redis whose store holds calendar holidays (days)
// and schedule s, daily at nine but on holidays.
func withCalendar(t *testing.T, days string) (*redis.Client, *config.Config, *Store) {
	t.Helper()
	rdb := redistest.New(t).TestClient(t)
	cfg := testConfig(t, "")
	writer := New(rdb, cfg.Namespace, nil, 1)
	putCalendar(t, writer, "holidays", days)
	put(t, writer, "s", dailyAtNine)
	return rdb, cfg, writer
}

// A schedule naming a calendar put at runtime runs on the days the
// calendar leaves: a change of the calendar reaches the schedule's job
// (decoded again, applied), a delete of it refuses the schedule (naming
// the calendar), and a calendar put again brings it back.
func TestScheduleFollowsTheRuntimeCalendarItNames(t *testing.T) {
	rdb, cfg, writer := withCalendar(t, `{dates: [2026-12-25]}`)
	put(t, writer, "plain", `{schedule: "0 9 * * *", handler: {name: h}}`)
	_, f, a := following(t, rdb, cfg)
	if j := a.job("@s"); j == nil || ticks(j, dec23, 3) != "2026-12-24 2026-12-26 2026-12-27" {
		t.Fatalf("after sync: %v", a.names())
	}
	if f.Len() != 2 || len(f.Calendars()) != 1 {
		t.Fatalf("len %d, calendars %v", f.Len(), f.Calendars())
	}
	putCalendar(t, writer, "holidays", `{dates: [2026-12-24, 2026-12-25]}`)
	poll.Require(t, 5*time.Second, "the calendar's change applied to the schedule", func() bool {
		j := a.job("@s")
		return j != nil && ticks(j, dec23, 2) == "2026-12-26 2026-12-27"
	})
	puts := a.puts
	if _, err := writer.Delete(context.Background(), CalendarID("holidays")); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 5*time.Second, "the schedule refused without its calendar", func() bool { return !a.has("@s") })
	if r := f.Refused(); len(r) != 1 || r[0].ID != "s" || !strings.Contains(r[0].Err.Error(), `no calendar "holidays"`) {
		t.Fatalf("refused %v", r)
	}
	if !a.has("@plain") || a.puts != puts {
		t.Errorf("a schedule naming no calendar was applied again (%d puts, %d before)", a.puts, puts)
	}
	putCalendar(t, writer, "holidays", `{dates: [2026-12-26]}`)
	poll.Require(t, 5*time.Second, "the schedule back with the calendar put again", func() bool {
		j := a.job("@s")
		return j != nil && ticks(j, dec23, 2) == "2026-12-24 2026-12-25"
	})
	if r := f.Refused(); len(r) != 0 {
		t.Fatalf("refused %v", r)
	}
}

// Calendars and schedules sit in different shards, read apart: a schedule
// naming a calendar of another shard is decoded with it, whichever shard
// is read first, and never refused meanwhile.
func TestScheduleNamingACalendarOfAnotherShardIsNeverRefused(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "schedules: {shards: 8}\n")
	writer := Of(rdb, cfg)
	calShard := writer.ShardOf(CalendarID("holidays"))
	var ids []string
	for i := 0; len(ids) < 3; i++ {
		if id := fmt.Sprintf("tenant-%d", i); writer.ShardOf(id) < calShard {
			ids = append(ids, id) // read before the calendar at sync
		}
	}
	if calShard == 0 {
		t.Fatal("the calendar's shard is the first: pick another name")
	}
	putCalendar(t, writer, "holidays", `{dates: [2026-12-25]}`)
	put(t, writer, ids[0], dailyAtNine)
	var logs safeBuffer
	st := Of(rdb, cfg)
	_, f, a := followingStore(t, st, cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if !a.has("@" + ids[0]) {
		t.Fatalf("sync: %v, refused %v", a.names(), f.Refused())
	}
	// put while the follower runs: the schedule's shard stream may be read
	// before the calendar's
	putCalendar(t, writer, "holidays", `{dates: [2026-12-24]}`)
	for _, id := range ids[1:] {
		put(t, writer, id, dailyAtNine)
	}
	poll.Require(t, 5*time.Second, "all three applied with the calendar", func() bool {
		for _, id := range ids {
			if j := a.job("@" + id); j == nil || ticks(j, dec23, 2) != "2026-12-25 2026-12-26" {
				return false
			}
		}
		return true
	})
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a schedule was refused on the way:\n%s", logs.String())
	}
}

// A worker's lookup of a schedule its copy does not hold yet (WithFetch)
// reads the calendars it names from Redis.
func TestScheduleJobFetchedReadsItsCalendars(t *testing.T) {
	rdb, cfg, writer := withCalendar(t, `{dates: [2026-12-24]}`)
	f := NewFollower(Of(rdb, cfg), cfg, nil, WithFetch())
	j, ok := f.ScheduleJob("@s")
	if !ok || ticks(j, dec23, 1) != "2026-12-25" {
		t.Fatalf("fetched %v %v", j, ok)
	}
	if len(f.Calendars()) != 0 {
		t.Error("a fetch changed the copy")
	}
	put(t, writer, "missing", `{schedule: "0 9 * * *", exclude: [nope], handler: {name: h}}`)
	if _, ok := f.ScheduleJob("@missing"); ok {
		t.Error("a schedule naming a calendar that does not exist was decoded")
	}
}

// A listing and a count of the schedules leave the calendars out, whatever
// the prefix; ListCalendars pages through them by name.
func TestListingsKeepCalendarsAndSchedulesApart(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "schedules: {shards: 3}\n")
	st := Of(rdb, cfg)
	ctx := context.Background()
	put(t, st, "a", `{schedule: "@hourly", handler: {name: h}}`)
	put(t, st, "z", `{schedule: "@hourly", handler: {name: h}}`)
	for _, n := range []string{"c1", "c2", "c3"} {
		putCalendar(t, st, n, `{weekdays: [sun]}`)
	}
	for _, prefix := range []string{"", "~", "~calendar/"} {
		recs, bad, _, err := st.List(ctx, prefix, "", 100)
		var ids []string
		for _, r := range recs {
			ids = append(ids, r.ID)
		}
		if err != nil || len(bad) != 0 || (prefix == "" && strings.Join(ids, ",") != "a,z") || (prefix != "" && len(ids) != 0) {
			t.Errorf("List(%q): %v %v %v", prefix, ids, bad, err)
		}
	}
	if n, err := st.Count(ctx); err != nil || n != 2 {
		t.Errorf("count %d %v", n, err)
	}
	var names []string
	after := ""
	for {
		recs, _, next, err := st.ListCalendars(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			n, _ := CalendarName(r.ID)
			names = append(names, n)
		}
		if next == "" {
			break
		}
		after = next
	}
	if strings.Join(names, ",") != "c1,c2,c3" {
		t.Errorf("calendars %v", names)
	}
}

// A Redis that restarted empty loses the calendars with the schedules: the
// follower puts both back, signed as they were, and the schedule keeps its
// calendar's days.
func TestRestorePutsBackTheCalendarsWithTheSchedules(t *testing.T) {
	srv := redistest.New(t)
	rdb := srv.TestClient(t)
	cfg := testConfig(t, "security: {signing_keys: [\""+testKey+"\"]}\n")
	writer := New(rdb, cfg.Namespace, handoff.NewSigner(cfg.Security), 1)
	putCalendar(t, writer, "holidays", `{dates: [2026-12-24]}`)
	put(t, writer, "s", dailyAtNine)
	_, f, a := following(t, rdb, cfg)
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	put(t, writer, "new", `{schedule: "@hourly", handler: {name: h}}`)
	poll.Require(t, 10*time.Second, "the calendar put back", func() bool {
		r, err := writer.Get(context.Background(), CalendarID("holidays"))
		return err == nil && bytes.Contains(r.Doc, []byte("2026-12-24")) && a.has("@new")
	})
	if j := a.job("@s"); j == nil || ticks(j, dec23, 1) != "2026-12-25" || len(f.Refused()) != 0 {
		t.Fatalf("job %v, refused %v", j, f.Refused())
	}
}

// A schedule refused because its calendar went is taken out of the
// replica (WithRefusals), not deleted: what a delete does (forget its
// shared marks, apply's removed) waits until the schedule is deleted.
func TestARefusedScheduleIsNotAppliedAsDeletedUntilItIs(t *testing.T) {
	rdb, cfg, writer := withCalendar(t, `{dates: [2026-12-25]}`)
	var mu sync.Mutex
	var refused []string
	_, _, a := followingStore(t, Of(rdb, cfg), cfg, WithRefusals(func(names []string) {
		mu.Lock()
		defer mu.Unlock()
		refused = append(refused, names...)
	}))
	if !a.has("@s") {
		t.Fatal("not applied")
	}
	if _, err := writer.Delete(context.Background(), CalendarID("holidays")); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 5*time.Second, "the schedule refused", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(refused) == 1 && refused[0] == "@s"
	})
	if !a.has("@s") {
		t.Fatal("a refusal was applied as a delete")
	}
	if _, err := writer.Delete(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 5*time.Second, "the delete of the refused schedule applied", func() bool { return !a.has("@s") })
}

// A calendar whose stored record cannot be read is refused with why, not
// dropped: read from its own shard for a schedule of another, it is listed
// among the refusals, and a definition naming it decoded outside the copy
// fails naming the calendar and why, not as if it did not exist.
func TestAnUnreadableCalendarIsRefusedSayingWhy(t *testing.T) {
	rdb := redistest.New(t).TestClient(t)
	cfg := testConfig(t, "schedules: {shards: 8}\n")
	writer := Of(rdb, cfg)
	putCalendar(t, writer, "holidays", `{dates: [2026-12-25]}`)
	var id string
	for i := 0; id == ""; i++ {
		if c := fmt.Sprintf("tenant-%d", i); writer.ShardOf(c) != writer.ShardOf(CalendarID("holidays")) {
			id = c
		}
	}
	put(t, writer, id, dailyAtNine)
	ctx := context.Background()
	if err := rdb.HSet(ctx, writer.keysOf(CalendarID("holidays")).defs, CalendarID("holidays"), "{not a record").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := writer.WithCalendarsOf(ctx, cfg, nil, []byte(dailyAtNine))
	if err == nil || !strings.Contains(err.Error(), `runtime calendar "holidays": `) {
		t.Errorf("a definition naming the unreadable calendar: %v, want an error naming it", err)
	}
	_, f, a := following(t, rdb, cfg)
	if a.has("@" + id) {
		t.Fatal("the schedule naming an unreadable calendar was applied")
	}
	r := f.Refused() // in id order
	if len(r) != 2 || r[0].ID != id || r[1].ID != CalendarID("holidays") {
		t.Fatalf("refused %v, want the schedule and the calendar", r)
	}
	if !strings.Contains(r[1].Err.Error(), "is not a baton schedule record") {
		t.Errorf("the calendar refused as %v, want why it cannot be read", r[1].Err)
	}
}
