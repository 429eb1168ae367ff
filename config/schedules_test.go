package config_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batonhq/baton/config"
)

// schedulesBase is a config whose runtime schedules may call URLs under
// https://hooks.example/tenants/ only.
func schedulesBase(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
schedules: {http_prefixes: ["https://hooks.example/tenants/"]}
jobs: []
`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A runtime schedule cannot name the Host its request is sent with: the
// request would reach another site served at the allowed host's address
// (a proxy routes by the Host it is given), outside schedules.http_prefixes.
func TestRuntimeHTTPScheduleCannotSetTheHostHeader(t *testing.T) {
	base := schedulesBase(t)
	for _, name := range []string{"Host", "host", "HOST"} {
		doc := `{schedule: "@hourly", http: {url: "https://hooks.example/tenants/42", headers: {` + name + `: admin.internal}}}`
		_, err := config.DecodeSchedule(base, "t/42", []byte(doc), time.Time{})
		if err == nil || !strings.Contains(err.Error(), "http.headers."+name) || !strings.Contains(err.Error(), "Host") {
			t.Errorf("header %s: %v", name, err)
		}
	}
	if _, err := config.DecodeSchedule(base, "t/42", []byte(`{schedule: "@hourly", http: {url: "https://hooks.example/tenants/42", headers: {X-Tenant: "42"}}}`), time.Time{}); err != nil {
		t.Errorf("another header: %v", err)
	}
}

// A runtime schedule whose lock_ttl (set, or the default) is longer than
// locking.restart_quarantine is refused at put, naming both: no run of it
// could take its execution lease. The job list's rule, which the list
// checks when it loads.
func TestRuntimeScheduleLongerThanTheRestartQuarantineIsRefused(t *testing.T) {
	base, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
locking: {restart_quarantine: 12s}
jobs:
  - {name: short, schedule: "@hourly", lock_ttl: 10s, handler: {name: h}}
`))
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]string{
		`{schedule: "@hourly", handler: {name: h}}`:                "30s (the default) is longer than locking.restart_quarantine 12s",
		`{schedule: "@hourly", lock_ttl: 20s, handler: {name: h}}`: "20s is longer than locking.restart_quarantine 12s",
	} {
		_, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{})
		if err == nil || !strings.Contains(err.Error(), "lock_ttl") || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "set lock_ttl to 12s or less") {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	if _, err := config.DecodeSchedule(base, "t/1", []byte(`{schedule: "@hourly", lock_ttl: 12s, handler: {name: h}}`), time.Time{}); err != nil {
		t.Errorf("lock_ttl equal to the quarantine: %v", err)
	}
}

// A runtime schedule's URL lies under an allowed prefix, whatever way it
// is spelled to leave it.
func TestRuntimeHTTPScheduleURLStaysUnderTheAllowedPrefixes(t *testing.T) {
	base := schedulesBase(t)
	for _, u := range []string{
		"https://hooks.example/tenants",
		"https://hooks.example/tenantsX/1",
		"https://hooks.example/tenants/../admin",
		"https://hooks.example/tenants/%2e%2e/admin",
		"https://hooks.example/tenants/%2E%2E%2Fadmin",
		"https://hooks.example/tenants/..%5cadmin",
		`https://hooks.example/tenants/..\admin`,
		"https://user:pw@hooks.example/tenants/1",
		"https://hooks.example@evil.example/tenants/1",
		"https://hooks.example.evil.example/tenants/1",
		"https://hooks.example:8443/tenants/1",
		"https://hooks.example./tenants/1",
		"http://hooks.example/tenants/1",
		"https://[::1]/tenants/1",
		"https:hooks.example/tenants/1",
		"//hooks.example/tenants/1",
		"https://hooks.examplе/tenants/1", // a Cyrillic e
		"https://hooks.eKample/tenants/1", // the Kelvin sign folds to k
		"https://hooks.example/tenants/..;/admin",
		"https://hooks.example/tenants/.;x/admin",
		"https://hooks.example/tenants/%252e%252e/admin",
	} {
		doc := `{schedule: "@hourly", http: {url: "` + strings.ReplaceAll(u, `\`, `\\`) + `"}}`
		if _, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{}); err == nil {
			t.Errorf("%s: allowed", u)
		}
	}
	for _, u := range []string{"https://hooks.example/tenants/1", "https://HOOKS.example/tenants/1/report?x=1"} {
		doc := `{schedule: "@hourly", http: {url: "` + u + `"}}`
		if _, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{}); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// A definition the put path accepts (DecodeSchedule on the user's
// document, then ScheduleDocument for the stored form) is one every replica
// accepts when it reads the stored form back: a raw DEL (U+007F) in the
// body, and an '&' in the URL, which the stored form escapes as \u0026.
func TestAStoredDefinitionIsReadAsItWasAccepted(t *testing.T) {
	base := schedulesBase(t)
	user := []byte("{\"schedule\":\"@hourly\",\"http\":{\"url\":\"https://hooks.example/tenants/42?a=1&b=2\",\"body\":\"x\x7fy\"}}")
	if _, err := config.DecodeSchedule(base, "t/42", user, time.Time{}); err != nil {
		return // refused at the put: consistent
	}
	stored, err := config.ScheduleDocument(user)
	if err != nil {
		t.Fatalf("accepted by DecodeSchedule, but ScheduleDocument: %v", err)
	}
	if _, err := config.DecodeSchedule(base, "t/42", stored, time.Time{}); err != nil {
		t.Fatalf("the put accepts %q and stores %q, which every replica refuses: %v", user, stored, err)
	}
}

// A number's meaning does not depend on whether some other string of the
// definition holds an escape: 1e400 (out of float64's range) is the same
// with and without a "\u0041" elsewhere in the document.
func TestANumberDecodesTheSameWithOrWithoutAnEscapeElsewhere(t *testing.T) {
	plain := []byte(`{"schedule":"@hourly","handler":{"name":"h","payload":{"n":1e400,"s":"A"}}}`)
	escaped := []byte(`{"schedule":"@hourly","handler":{"name":"h","payload":{"n":1e400,"s":"\u0041"}}}`)
	a, errA := config.ScheduleDocument(plain)
	b, errB := config.ScheduleDocument(escaped)
	if string(a) != string(b) || (errA == nil) != (errB == nil) {
		t.Fatalf("the same definition stored two ways: without an escape %s (err %v), with one %s (err %v)", a, errA, b, errB)
	}
}

// A replica runs the body the put accepted: a raw NEL (U+0085) in a JSON
// string, in a definition whose stored form holds a backslash (the '&' of
// its URL escaped).
func TestAStoredDefinitionsBodyIsTheBodyPut(t *testing.T) {
	base := schedulesBase(t)
	user := []byte("{\"schedule\":\"@hourly\",\"http\":{\"method\":\"POST\",\"url\":\"https://hooks.example/tenants/42?a=1&b=2\",\"body\":\"x\u0085y\"}}")
	put, err := config.DecodeSchedule(base, "t/42", user, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := config.ScheduleDocument(user)
	if err != nil {
		t.Fatal(err)
	}
	run, err := config.DecodeSchedule(base, "t/42", stored, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if put.HTTP.Body != run.HTTP.Body {
		t.Fatalf("body %q at the put, %q as replicas read the stored %q", put.HTTP.Body, run.HTTP.Body, stored)
	}
}

// A host is compared as ASCII only: "localhoſt" (a long s, which Unicode
// case folding takes for "s") is not "localhost", and is refused (the
// request would go to its xn-- form); a prefix's host must be ASCII too.
func TestRuntimeHTTPScheduleHostComparedAsASCII(t *testing.T) {
	base, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
schedules: {http_prefixes: ["http://localhost:8080/hooks/"]}
jobs: []
`))
	if err != nil {
		t.Fatal(err)
	}
	doc := `{schedule: "@hourly", http: {url: "http://localho` + "\u017f" + `t:8080/hooks/1"}}`
	if _, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{}); err == nil || !strings.Contains(err.Error(), "must be ASCII") {
		t.Errorf("a long s in the host: %v", err)
	}
	_, err = config.Load([]byte("redis: {url: \"redis://127.0.0.1:1/0\"}\nschedules: {http_prefixes: [\"https://b\u00fccher.example/\"]}\njobs: []\n"))
	if err == nil || !strings.Contains(err.Error(), "schedules.http_prefixes[0]") || !strings.Contains(err.Error(), "xn--") {
		t.Errorf("a non-ASCII prefix host: %v", err)
	}
}

// A header value with a control character (CR, LF, ...) is refused where
// it is written, in a runtime schedule's put and in the job list, without
// quoting the value: every run of it would fail.
func TestHTTPHeaderValueWithAControlCharacterIsRefused(t *testing.T) {
	base := schedulesBase(t)
	doc := `{schedule: "@hourly", http: {url: "https://hooks.example/tenants/1", headers: {X-Tenant: "1\r\nX-Admin: yes"}}}`
	if _, err := config.DecodeSchedule(base, "t/1", []byte(doc), time.Time{}); err == nil || !strings.Contains(err.Error(), "http.headers.X-Tenant") ||
		!strings.Contains(err.Error(), "control character") || strings.Contains(err.Error(), "X-Admin") {
		t.Errorf("a runtime schedule's header with CR LF: %v", err)
	}
	_, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
jobs:
  - {name: j, schedule: "@hourly", http: {url: "https://a.example/", headers: {X-A: "a\nb"}}}
`))
	if err == nil || !strings.Contains(err.Error(), "http.headers.X-A") || !strings.Contains(err.Error(), "control character") {
		t.Errorf("a job list header with LF: %v", err)
	}
}

// A runtime schedule may name a limit of the job list; one the list does
// not define is refused at put, naming the limits there are.
func TestRuntimeScheduleNamesALimitOfTheJobList(t *testing.T) {
	base, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
limits: {warehouse: 2}
jobs: []
`))
	if err != nil {
		t.Fatal(err)
	}
	j, err := config.DecodeSchedule(base, "t/1", []byte(`{schedule: "@hourly", limit: warehouse, handler: {name: h}}`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if name, n := base.LimitOf(j); name != "warehouse" || n != 2 {
		t.Errorf("LimitOf = %q, %d", name, n)
	}
	_, err = config.DecodeSchedule(base, "t/1", []byte(`{schedule: "@hourly", limit: lake, handler: {name: h}}`), time.Time{})
	if err == nil || !strings.Contains(err.Error(), `limit: no limit "lake": the limits are warehouse`) {
		t.Errorf("an unknown limit: %v", err)
	}
}

// mapSource is a config.ChildSource of runtime jobs by name.
type mapSource map[string]*config.Job

func (m mapSource) ScheduleJob(name string) (*config.Job, bool) { j, ok := m[name]; return j, ok }

func (m mapSource) ScheduleChildren(job string) []*config.Job {
	var out []*config.Job
	for _, j := range m {
		if slices.Contains(j.After, job) {
			out = append(out, j)
		}
	}
	return out
}

// A runtime schedule runs after jobs of the list and runtime schedules
// ("@" + id) its config finds: it ticks at their ticks, waits
// starting_deadline 1h by default, and Children finds it beside the job
// list's. A parent that does not exist, itself, a parent named twice, a
// singleton and a cycle through other runtime schedules are refused.
func TestRuntimeScheduleChainsToListJobsAndSchedules(t *testing.T) {
	base, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
timezone: UTC
jobs:
  - {name: extract, schedule: "0 2 * * *", handler: {name: h}}
  - {name: pump, mode: singleton, handler: {name: h}}
`))
	if err != nil {
		t.Fatal(err)
	}
	src := mapSource{}
	cfg := base.WithSource(src)
	decode := func(id, doc string) (*config.Job, error) {
		j, err := config.DecodeSchedule(cfg, id, []byte(doc), time.Time{})
		if err == nil {
			src[j.Name] = j
		}
		return j, err
	}
	if _, err := decode("other", `{schedule: "30 3 * * *", handler: {name: h}}`); err != nil {
		t.Fatal(err)
	}
	load, err := decode("load", `{after: [extract, "@other"], handler: {name: h}}`)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if a, b := load.Sched.Next(from), load.Sched.Next(from.Add(3*time.Hour)); a.Hour() != 2 || b.Hour() != 3 || b.Minute() != 30 {
		t.Errorf("ticks %s, %s: want its parents' (02:00, 03:30)", a, b)
	}
	if load.StartingDeadline != config.DefaultChainWait || load.OnParentFailure != config.ParentFailureSkip {
		t.Errorf("defaults: %s %s", load.StartingDeadline, load.OnParentFailure)
	}
	if ch := cfg.Children("extract"); len(ch) != 1 || ch[0].Name != "@load" {
		t.Errorf("children of extract: %v", ch)
	}
	if _, err := decode("report", `{after: ["@load"], on_parent_failure: run, handler: {name: h}}`); err != nil {
		t.Errorf("a runtime schedule after a chained one: %v", err)
	}
	for doc, want := range map[string]string{
		`{after: [nope], handler: {name: h}}`:                         `after[0]: no job "nope"`,
		`{after: ["@nope"], handler: {name: h}}`:                      `after[0]: no job "@nope"`,
		`{after: ["@x"], handler: {name: h}}`:                         "the schedule itself",
		`{after: [extract, extract], handler: {name: h}}`:             `after[1]: "extract" named twice`,
		`{after: [pump], handler: {name: h}}`:                         "is a singleton",
		`{after: [extract], schedule: "@hourly", handler: {name: h}}`: "schedule: not with after",
		`{after: ["@report"], handler: {name: h}}`:                    "", // no cycle: @x is not among its parents yet
	} {
		_, err := config.DecodeSchedule(cfg, "x", []byte(doc), time.Time{})
		if (want == "") != (err == nil) || want != "" && !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	// @other put again after @report: a cycle other -> report -> load -> other
	if _, err := decode("other", `{after: ["@report"], handler: {name: h}}`); err == nil || !strings.Contains(err.Error(), "a cycle: @other -> @report -> @load -> @other") {
		t.Errorf("a cycle: %v", err)
	}
}

// A calendar put at runtime is read as the job list's are (dates, ranges,
// weekdays), stored as compact JSON, and refused with the field and why
// when it is wrong; a file is not read from a runtime definition.
func TestRuntimeCalendarDecodes(t *testing.T) {
	c, stored, err := config.DecodeCalendar("holidays-de", []byte("dates: [2026-12-25]\nranges: [2026-12-31..2027-01-01]\nweekdays: [sun]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(stored), `{"dates":["2026-12-25"],"ranges":["2026-12-31..2027-01-01"],"weekdays":["sun"]}`; got != want {
		t.Errorf("stored %s, want %s", got, want)
	}
	for day, in := range map[string]bool{"2026-12-25": true, "2027-01-01": true, "2026-12-27": true, "2026-12-28": false} {
		d, _ := time.Parse(time.DateOnly, day)
		if c.Calendar.Contains(d) != in {
			t.Errorf("%s in the calendar: %v, want %v", day, !in, in)
		}
	}
	for doc, want := range map[string]string{
		`{dates: [2026-13-01]}`:            `calendars.h.dates[0]: "2026-13-01" is no date`,
		`{ranges: [2026-12-31]}`:           `calendars.h.ranges[0]: "2026-12-31": want FROM..TO`,
		`{weekdays: [caturday]}`:           `calendars.h.weekdays[0]: "caturday" is no weekday`,
		`{}`:                               "calendars.h: empty",
		`{file: /etc/holidays}`:            "calendars.h.file: not in a calendar put at runtime",
		`{dates: [2026-12-24], note: x}`:   "note",
		`[2026-12-24]`:                     "calendars.h: the top level must be a mapping",
		`{dates: [2026-12-24]`:             ":1: calendars.h: did not find expected",
		`{dates: "2026-12-24"}`:            "calendars.h.dates",
		`{dates: [2026-12-24], dates: []}`: "dates",
	} {
		_, _, err := config.DecodeCalendar("h", []byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
		}
	}
	if _, _, err := config.DecodeCalendar("Holidays", []byte(`{dates: [2026-12-24]}`)); err == nil || !strings.Contains(err.Error(), "invalid calendar name") {
		t.Errorf("bad name: %v", err)
	}
	big := []byte(`{dates: [` + strings.Repeat(`2026-12-24, `, config.MaxCalendarDocument/12+1) + `]}`)
	if _, _, err := config.DecodeCalendar("h", big); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("too long: %v", err)
	}
}

// A runtime schedule may name a calendar put at runtime (Config.WithCalendars)
// as it names the job list's: its ticks on the calendar's days are not
// due, and ExcludedBy says which calendar left a tick out. Without it, the
// schedule is refused naming the calendar and how to put one; the job
// list's calendar wins a name both have.
func TestRuntimeScheduleNamesARuntimeCalendar(t *testing.T) {
	base, err := config.Load([]byte(`redis: {url: "redis://127.0.0.1:1/0"}
timezone: UTC
calendars: {weekend: {weekdays: [sat, sun]}}
jobs: []
`))
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{schedule: "0 9 * * *", exclude: [holidays, weekend], handler: {name: h}}`)
	if _, err := config.DecodeSchedule(base, "t/1", doc, time.Time{}); err == nil ||
		!strings.Contains(err.Error(), `no calendar "holidays"`) || !strings.Contains(err.Error(), "baton calendars put") {
		t.Fatalf("without the runtime calendar: %v", err)
	}
	hol, _, err := config.DecodeCalendar("holidays", []byte(`{dates: [2026-12-24, 2026-12-25]}`))
	if err != nil {
		t.Fatal(err)
	}
	shadow, _, err := config.DecodeCalendar("weekend", []byte(`{weekdays: [mon]}`))
	if err != nil {
		t.Fatal(err)
	}
	withCals := base.WithCalendars(map[string]*config.CalendarSpec{"holidays": hol, "weekend": shadow})
	j, err := config.DecodeSchedule(withCals, "t/1", doc, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 12, 23, 10, 0, 0, 0, time.UTC)
	var got []string
	for t := j.Sched.Next(from); len(got) < 3; t = j.Sched.Next(t) {
		got = append(got, t.Format(time.DateOnly))
	}
	// 24th, 25th holidays; 26th, 27th the job list's weekend; Monday 28th runs
	if want := "2026-12-28 2026-12-29 2026-12-30"; strings.Join(got, " ") != want {
		t.Errorf("ticks %v, want %s", got, want)
	}
	if why := base.ExcludedBy(j, time.Date(2026, 12, 25, 9, 0, 0, 0, time.UTC)); why != "holidays" {
		t.Errorf("excluded by %q, want holidays (the job's own calendar, not the config's)", why)
	}
	if def := base.JobDefinition(j); !strings.Contains(def, "calendar holidays: ") {
		t.Errorf("the definition compared between replicas leaves the runtime calendar out:\n%s", def)
	}
	if len(base.Calendars) != 1 {
		t.Errorf("WithCalendars changed the config it was called on: %v", base.Calendars)
	}
	if got := config.ScheduleCalendars(doc); strings.Join(got, ",") != "holidays,weekend" {
		t.Errorf("ScheduleCalendars %v", got)
	}
}

// A runtime schedule put to run after the end of a chain that runs after
// it (a cycle of 66, the longest chain taken) is refused, as a shorter
// cycle is; a longer chain is refused for its depth: the depth bound does
// not turn a way back too far up into none.
func TestRuntimeScheduleClosingALongCycleIsRefused(t *testing.T) {
	base, err := config.Load([]byte("redis: {url: \"redis://127.0.0.1:1/0\"}\ntimezone: UTC\n"))
	if err != nil {
		t.Fatal(err)
	}
	src := mapSource{}
	cfg := base.WithSource(src)
	decode := func(id, doc string) error {
		j, err := config.DecodeSchedule(cfg, id, []byte(doc), time.Time{})
		if err == nil {
			src[j.Name] = j
		}
		return err
	}
	const n = 66 // the longest chain of runtime schedules taken
	if err := decode("a1", `{schedule: "@hourly", handler: {name: h}}`); err != nil {
		t.Fatal(err)
	}
	for i := 2; i <= n; i++ {
		if err := decode(fmt.Sprintf("a%d", i), fmt.Sprintf(`{after: ["@a%d"], handler: {name: h}}`, i-1)); err != nil {
			t.Fatalf("a%d: %v", i, err)
		}
	}
	err = decode("a1", fmt.Sprintf(`{after: ["@a%d"], handler: {name: h}}`, n))
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a1 after @a%d, which runs after a1 through a%d..a2: %v", n, n, err)
	}
	// one longer is refused for its depth, where a way back is not looked for
	if err := decode(fmt.Sprintf("a%d", n+1), fmt.Sprintf(`{after: ["@a%d"], handler: {name: h}}`, n)); err == nil || !strings.Contains(err.Error(), "at most 66 long") {
		t.Fatalf("a chain of %d: %v", n+1, err)
	}
}
