package baton_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/config"
	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
	"github.com/batonhq/baton/internal/schedstore"
	"github.com/batonhq/baton/jobs"
)

// A calendar put at runtime is what runtime schedules name beside the job
// list's: a put naming one that does not exist is refused (saying how to
// put it), the next ticks and the ledger leave its days out (naming it), a
// listing of the schedules does not show it, and it cannot be deleted
// while a schedule names it; a job list calendar's name cannot be put.
func TestRuntimeCalendarsThroughTheCluster(t *testing.T) {
	t.Parallel() // its own Redis
	srv := redistest.New(t)
	c := openCluster(t, schedulesConfig(t, srv, "timezone: UTC\ncalendars: {weekend: {weekdays: [sat, sun]}}"))
	ctx := context.Background()
	doc := []byte(`{schedule: "0 9 * * *", exclude: [holidays, weekend], handler: {name: report}}`)
	_, err := c.PutScheduleDocument(ctx, "report/a", doc, baton.AheadOfDeploy())
	var ce *config.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `exclude[0]: no calendar "holidays"`) || !strings.Contains(err.Error(), "baton calendars put") {
		t.Fatalf("a put naming a calendar that does not exist: %v", err)
	}
	if _, err := c.PutCalendar(ctx, "weekend", baton.CalendarSpec{Weekdays: []string{"mon"}}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "the job list defines a calendar of this name") {
		t.Errorf("a put of the job list's calendar: %v", err)
	}
	if _, err := c.PutCalendar(ctx, "holidays", baton.CalendarSpec{Dates: []string{"2026-13-01"}}); !errors.As(err, &ce) || !strings.Contains(err.Error(), `calendars.holidays.dates[0]`) {
		t.Errorf("a bad calendar: %v", err)
	}
	// every day from tomorrow to 9 days on, but the weekend's
	tomorrow := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	cal, err := c.PutCalendar(ctx, "holidays", baton.CalendarSpec{Ranges: []string{tomorrow.Format(time.DateOnly) + ".." + tomorrow.AddDate(0, 0, 9).Format(time.DateOnly)}})
	if err != nil || cal.Version != 1 || cal.Name != "holidays" {
		t.Fatalf("put: %+v %v", cal, err)
	}
	if _, err := c.PutScheduleDocument(ctx, "report/a", doc, baton.AheadOfDeploy()); err != nil {
		t.Fatal(err)
	}
	s, err := c.GetSchedule(ctx, "report/a", 1)
	if err != nil || s.Error != "" || len(s.Next) != 1 {
		t.Fatalf("get: %+v %v", s, err)
	}
	for d := tomorrow.AddDate(0, 0, 10); ; d = d.AddDate(0, 0, 1) {
		if wd := d.Weekday(); wd != time.Saturday && wd != time.Sunday {
			if want := d.Add(9 * time.Hour); !s.Next[0].Equal(want) {
				t.Errorf("next tick %s, want %s (the first day neither calendar leaves out)", s.Next[0], want)
			}
			break
		}
	}
	l, err := c.Ticks(ctx, "@report/a", tomorrow, tomorrow.Add(10*time.Hour))
	if err != nil || len(l.Ticks) != 1 || l.Ticks[0].Outcome != baton.OutcomeExcluded || !strings.Contains(l.Ticks[0].Reason, "holidays") {
		t.Errorf("ledger of a tick on a runtime calendar's day: %+v %v", l.Ticks, err)
	}
	page, err := c.ListSchedules(ctx, baton.ScheduleQuery{})
	if err != nil || len(page.Schedules) != 1 || page.Schedules[0].ID != "report/a" {
		t.Errorf("schedules listed: %+v %v", page.Schedules, err)
	}
	cals, err := c.ListCalendars(ctx, "", 0)
	if err != nil || len(cals.Calendars) != 1 || cals.Calendars[0].Name != "holidays" {
		t.Errorf("calendars listed: %+v %v", cals, err)
	}
	if err := c.DeleteCalendar(ctx, "holidays"); !errors.Is(err, baton.ErrCalendarInUse) || !strings.Contains(err.Error(), `"report/a"`) {
		t.Errorf("a delete of a calendar a schedule names: %v", err)
	}
	if err := c.DeleteSchedule(ctx, "report/a", false); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteCalendar(ctx, "holidays"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteCalendar(ctx, "holidays"); !errors.Is(err, baton.ErrNoCalendar) {
		t.Errorf("a second delete: %v", err)
	}
	if _, err := c.GetCalendar(ctx, "holidays"); !errors.Is(err, baton.ErrNoCalendar) {
		t.Errorf("a get after the delete: %v", err)
	}
}

// Replicas run a runtime schedule on the days of the runtime calendar it
// names as it is now: a schedule excluded today runs once the calendar is
// put without today, never twice a tick.
func TestReplicasRunARuntimeScheduleByItsCalendarAsItChanges(t *testing.T) {
	t.Parallel() // its own Redis and replicas
	srv := redistest.New(t)
	cfg := schedulesConfig(t, srv, "timezone: UTC")
	c := openCluster(t, cfg)
	counter := newRunCounter()
	reg := jobs.NewRegistry()
	reg.Register("report", jobs.HandlerFunc(counter.handler))
	for _, id := range []string{"r0", "r1"} {
		running(t, cfg, baton.WithHandlers(reg), baton.WithReplicaID(id))
	}
	ctx := context.Background()
	today := time.Now().UTC()
	days := func(ds ...time.Time) baton.CalendarSpec {
		var s baton.CalendarSpec
		for _, d := range ds {
			s.Dates = append(s.Dates, d.Format(time.DateOnly))
		}
		return s
	}
	// today and tomorrow: a test that runs over midnight stays excluded
	if _, err := c.PutCalendar(ctx, "off", days(today, today.AddDate(0, 0, 1))); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutSchedule(ctx, "report/a", baton.ScheduleSpec{Schedule: "@every 1s", Handler: "report", Exclude: []string{"off"}}); err != nil {
		t.Fatal(err)
	}
	l, err := c.Ticks(ctx, "@report/a", time.Now(), time.Now().Add(3*time.Second))
	if err != nil || len(l.Ticks) == 0 || l.Ticks[0].Outcome != baton.OutcomeExcluded {
		t.Fatalf("ledger while excluded: %+v %v", l.Ticks, err)
	}
	if _, err := c.PutCalendar(ctx, "off", days(today.AddDate(0, 0, -2))); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 20*time.Second, "ticks run once the calendar leaves today", func() bool {
		n, _ := counter.ticks("@report/a")
		return n >= 2
	})
	if _, most := counter.ticks("@report/a"); most != 1 {
		t.Fatalf("a tick ran %d times", most)
	}
}

// One runtime calendar whose stored record cannot be read (bad data in
// Redis) fails only the schedules naming it: a listing gives those their
// Error, naming the calendar once and saying to put it again, and lists
// the others with their next ticks; a get of one naming no calendar works.
func TestAnUnreadableCalendarFailsOnlyTheSchedulesNamingIt(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	c := openCluster(t, schedulesConfig(t, srv, "timezone: UTC"))
	ctx := context.Background()
	if _, err := c.PutCalendar(ctx, "holidays", baton.CalendarSpec{Dates: []string{"2030-12-25"}}); err != nil {
		t.Fatal(err)
	}
	for id, doc := range map[string]string{
		"report/a": `{schedule: "0 9 * * *", exclude: [holidays], handler: {name: report}}`,
		"plain":    `{schedule: "0 9 * * *", handler: {name: report}}`,
	} {
		if _, err := c.PutScheduleDocument(ctx, id, []byte(doc), baton.AheadOfDeploy()); err != nil {
			t.Fatal(err)
		}
	}
	rdb := srv.TestClient(t)
	id := schedstore.CalendarID("holidays")
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	corrupted := 0
	for _, k := range keys {
		if rdb.Type(ctx, k).Val() == "hash" && rdb.HExists(ctx, k, id).Val() {
			if err := rdb.HSet(ctx, k, id, "{not a record").Err(); err != nil {
				t.Fatal(err)
			}
			corrupted++
		}
	}
	if corrupted != 1 {
		t.Fatalf("found the calendar's record in %d hashes", corrupted)
	}
	page, err := c.ListSchedules(ctx, baton.ScheduleQuery{Next: 1, Runs: true})
	if err != nil {
		t.Fatalf("ListSchedules with one unreadable calendar: %v", err)
	}
	if len(page.Schedules) != 2 {
		t.Fatalf("listed %+v", page.Schedules)
	}
	for _, s := range page.Schedules {
		switch s.ID {
		case "plain":
			if s.Error != "" || len(s.Next) == 0 {
				t.Errorf("plain, naming no calendar: error %q, next %v", s.Error, s.Next)
			}
		case "report/a":
			if strings.Count(s.Error, `runtime calendar "holidays"`) != 1 || !strings.Contains(s.Error, "put the calendar again") {
				t.Errorf("report/a, naming the unreadable calendar, says %q", s.Error)
			}
		}
	}
	if s, err := c.GetSchedule(ctx, "plain", 1); err != nil || len(s.Next) != 1 {
		t.Errorf("GetSchedule(plain): %+v %v", s, err)
	}
}
