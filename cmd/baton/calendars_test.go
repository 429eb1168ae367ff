package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/redistest"
)

// A runtime calendar put from flags, a days file or a definition file;
// listed, shown, named by a schedule, refused for deletion while the
// schedule names it, deleted after; a bad day names the file and line.
func TestCalendarsPutListGetDelete(t *testing.T) {
	cfg := schedulesConfigFile(t, redistest.New(t))
	dir := t.TempDir()
	days := filepath.Join(dir, "holidays.txt")
	if err := writeFile(days, "# Germany\n2026-12-25\n2026-12-31..2027-01-01  # new year\n"); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runIn("calendars", "put", "--config", cfg, "holidays", "--days-file", days, "--date", "2026-12-24", "--weekday", "sun")
	if code != 0 || out != "calendar holidays put: version 1\n" {
		t.Fatalf("put: %d %q %q", code, out, errs)
	}
	code, out, errs = runIn("calendars", "get", "--config", cfg, "holidays")
	if code != 0 || !strings.Contains(out, "dates:      2026-12-24 2026-12-25\n") || !strings.Contains(out, "ranges:     2026-12-31..2027-01-01\n") || !strings.Contains(out, "weekdays:   sun\n") {
		t.Fatalf("get: %d %q %q", code, out, errs)
	}
	def := filepath.Join(dir, "business.yaml")
	if err := writeFile(def, "weekdays: [mon, tue, wed, thu, fri]\ndates:\n  - 2026-02-30\n"); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runIn("calendars", "put", "--config", cfg, "business", "-f", def)
	if code != 2 || !strings.Contains(errs, def+":3: calendars.business.dates[0]") {
		t.Fatalf("a bad date in a file: %d %q %q", code, out, errs)
	}
	if err := writeFile(def, "weekdays: [mon, tue, wed, thu, fri]\n"); err != nil {
		t.Fatal(err)
	}
	if code, out, errs = runIn("calendars", "put", "--config", cfg, "business", "-f", def); code != 0 {
		t.Fatalf("put -f: %d %q %q", code, out, errs)
	}
	code, out, errs = runIn("calendars", "list", "--config", cfg)
	if code != 0 || !strings.HasPrefix(out, "NAME") || !strings.Contains(out, "business") || !strings.Contains(out, "holidays  2 ") {
		t.Fatalf("list: %d %q %q", code, out, errs)
	}
	code, out, errs = runIn("calendars", "list", "--config", cfg, "--json", "--limit", "1")
	var page baton.CalendarPage
	if code != 0 || json.Unmarshal([]byte(out), &page) != nil || len(page.Calendars) != 1 || page.Next != "business" {
		t.Fatalf("list --json: %d %q %q", code, out, errs)
	}
	if code, out, errs = runIn("schedules", "put", "--config", cfg, "report/a", "--schedule", "0 9 * * *", "--handler", "report", "--force", "--exclude", "holidays"); code != 0 {
		t.Fatalf("a schedule naming it: %d %q %q", code, out, errs)
	}
	// baton next shows what the runtime calendar removed from it
	code, out, errs = runIn("next", "--config", cfg, "--job", "@report/a", "-n", "1", "--from", "2026-12-23T12:00:00Z")
	if code != 0 || !strings.Contains(out, "not run: 2026-12-24T09:00:00Z  (excluded: holidays)") {
		t.Fatalf("next: %d %q %q", code, out, errs)
	}
	code, out, errs = runIn("calendars", "delete", "--config", cfg, "holidays")
	if code != 1 || !strings.Contains(errs, `"report/a"`) {
		t.Fatalf("a delete while a schedule names it: %d %q %q", code, out, errs)
	}
	if code, out, errs = runIn("schedules", "delete", "--config", cfg, "report/a"); code != 0 {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	if code, out, errs = runIn("calendars", "delete", "--config", cfg, "holidays"); code != 0 || out != "calendar holidays deleted\n" {
		t.Fatalf("delete: %d %q %q", code, out, errs)
	}
	if code, _, errs = runIn("calendars", "get", "--config", cfg, "holidays"); code != 2 || !strings.Contains(errs, "no such runtime calendar") {
		t.Fatalf("get after the delete: %d %q", code, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"put", "x"}, "give the days"},
		{[]string{"put", "x", "--date", "2026-12-24", "-f", def}, "exclude each other"},
		{[]string{"put", "Bad", "--date", "2026-12-24"}, "invalid calendar name"},
		{[]string{"put", "x", "--days-file", def}, "is no date"},
		{[]string{"get"}, "name one calendar"},
		{[]string{"list", "--limit", "0"}, "--limit must be from 1 to 1000"},
	} {
		code, _, errs := runIn(append(append([]string{"calendars"}, tc.args...), "--config", cfg)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: %d %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}
