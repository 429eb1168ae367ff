package main

import (
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/redistest"
)

// baton next SPEC prints the fire times of a bare spec in --tz (default
// UTC), with no config; a spec split over several arguments is one spec.
func TestNextBareSpec(t *testing.T) {
	t.Setenv("BATON_CONFIG", "/nonexistent/baton.yaml") // not read for a bare spec
	berlin := `schedule: "0 9 * * 1-5" in Europe/Berlin
  2026-03-27T09:00:00+01:00
  2026-03-30T09:00:00+02:00  (DST: UTC+1 -> UTC+2)
  2026-03-31T09:00:00+02:00
`
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"next", "0 9 * * 1-5", "--tz", "Europe/Berlin", "-n", "3", "--from", "2026-03-27T00:00:00+01:00"}, berlin},
		{[]string{"next", "--tz=Europe/Berlin", "-n3", "--from", "2026-03-27T00:00:00+01:00", "0", "9", "*", "*", "1-5"}, berlin},
		{[]string{"next", "@daily", "-n", "2", "--from", "2026-01-01T12:00:00Z"}, "schedule: \"@daily\" in UTC\n  2026-01-02T00:00:00Z\n  2026-01-03T00:00:00Z\n"},
		{[]string{"next", "*/30 * * * *", "--tz", "Europe/Berlin", "--dst", "once", "-n", "4", "--from", "2026-10-25T01:00:00+02:00"}, `schedule: "*/30 * * * *" in Europe/Berlin (dst: once)
  2026-10-25T01:30:00+02:00
  2026-10-25T02:00:00+02:00  (repeated hour, first copy)
  2026-10-25T02:30:00+02:00  (repeated hour, first copy)
  not run: 2026-10-25T02:00:00+01:00  (repeated hour, second copy; dst: once)
  not run: 2026-10-25T02:30:00+01:00  (repeated hour, second copy; dst: once)
  2026-10-25T03:00:00+01:00  (DST: UTC+2 -> UTC+1)
`},
		{[]string{"next", "30 2 * * *", "--tz", "Europe/Berlin", "--dst", "skip", "-n", "1", "--from", "2026-03-28T12:00:00+01:00"}, `schedule: "30 2 * * *" in Europe/Berlin (dst: skip)
  not run: 2026-03-29 02:30  (skipped by the clock change; dst: skip)
  2026-03-30T02:30:00+02:00  (DST: UTC+1 -> UTC+2)
`},
		{[]string{"next", "H H/12 * * *", "--name", "report", "-n", "2", "--from", "2026-01-01T00:00:00Z"}, "report: \"H H/12 * * *\" (H for report: \"4 1-23/12 * * *\") in UTC\n  2026-01-01T01:04:00Z\n  2026-01-01T13:04:00Z\n"},
	} {
		if code, out, errs := runIn(tc.args...); code != 0 || out != tc.want {
			t.Errorf("baton %q: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", tc.args, code, errs, out, tc.want)
		}
	}
}

// A bare spec with --job or --config, --tz without a spec, a bad zone or a
// bad spec are usage errors naming what is wrong.
func TestNextBareSpecUsageErrors(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, twoJobs)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"next", "@daily", "--job", "a", "--config", cfg}, `a bare SPEC "@daily" and --job "a" exclude each other`},
		{[]string{"next", "@daily", "--config", cfg}, `a bare SPEC "@daily" and --config`},
		{[]string{"next", "--tz", "Europe/Berlin", "--config", cfg}, `--tz "Europe/Berlin" goes with a bare SPEC`},
		{[]string{"next", "@daily", "--tz", "Mars/Olympus"}, `--tz "Mars/Olympus": unknown time zone`},
		{[]string{"next", "@daily", "--tz", "Local"}, `--tz "Local": name a zone`},
		{[]string{"next", "61 * * * *"}, `schedule: "61 * * * *": `},
		{[]string{"next", "H * * * *"}, `H picks a value from the job's name`},
		{[]string{"next", "H(9-1) * * * *", "--name", "report"}, `minute field "H(9-1)": the range's start is after its end`},
		{[]string{"next", "--name", "report", "--config", cfg}, `--name "report" goes with a bare SPEC`},
		{[]string{"next", "--dst", "once", "--config", cfg}, `--dst "once" goes with a bare SPEC`},
		{[]string{"next", "0 2 * * *", "--dst", "twice"}, `--dst "twice": want vixie, once, skip or both`},
		{[]string{"next", "@every 1h", "--dst", "once"}, `@every follows absolute time`},
	} {
		if code, _, errs := runIn(tc.args...); code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("baton %q: exit %d, stderr %q; want %d and %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
}

// --job takes a runtime schedule's "@" name: its next ticks, in its zone.
func TestNextOfARuntimeSchedule(t *testing.T) {
	t.Parallel()
	cfg := schedulesConfigFile(t, redistest.New(t))
	if code, out, errs := runIn("schedules", "put", "--config", cfg, "report/tenant-7", "--schedule", "0 9 * * 1", "--timezone", "Europe/Berlin", "--handler", "report"); code != 0 {
		t.Fatalf("put: %d %q %q", code, out, errs)
	}
	code, out, errs := runIn("next", "--config", cfg, "--job", "@report/tenant-7", "-n", "2")
	if code != 0 || !strings.Contains(out, "@report/tenant-7") || strings.Count(out, "09:00:00+01:00")+strings.Count(out, "09:00:00+02:00") != 2 {
		t.Fatalf("next --job @id: %d %q %q", code, out, errs)
	}
	if code, _, errs := runIn("next", "--config", cfg, "--job", "@report/nobody"); code != 2 || !strings.Contains(errs, "no such runtime schedule") {
		t.Fatalf("next --job of an absent schedule: %d %q", code, errs)
	}
}

// baton next lists the ticks a job's calendars leave out, and which one.
func TestNextShowsWhatCalendarsRemove(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `redis: {url: "redis://127.0.0.1:6379/0"}
timezone: Europe/Berlin
calendars:
  holidays: {dates: [2026-12-24, 2026-12-25]}
  business-days: {weekdays: [mon, tue, wed, thu, fri]}
jobs:
  - name: report
    schedule: "0 9 * * *"
    exclude: [holidays]
    only: [business-days]
    exec: {command: ["true"]}
`)
	want := `report: "0 9 * * *" in Europe/Berlin (exclude: holidays) (only: business-days)
  not run: 2026-12-24T09:00:00+01:00  (excluded: holidays)
  not run: 2026-12-25T09:00:00+01:00  (excluded: holidays)
  not run: 2026-12-26T09:00:00+01:00  (excluded: not in business-days)
  not run: 2026-12-27T09:00:00+01:00  (excluded: not in business-days)
  2026-12-28T09:00:00+01:00
  2026-12-29T09:00:00+01:00
`
	if code, out, errs := runIn("next", "--config", cfg, "-n", "2", "--from", "2026-12-23T12:00:00+01:00"); code != 0 || out != want {
		t.Errorf("next: %d %q\n got:\n%s\nwant:\n%s", code, errs, out, want)
	}
}

// baton next shows a chained job's parents and its ticks, theirs.
func TestNextOfAChainedJob(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, `redis: {url: "redis://127.0.0.1:6379/0"}
jobs:
  - {name: extract, schedule: "0 * * * *", exec: {command: ["true"]}}
  - {name: weekly, schedule: "30 0 * * 1", exec: {command: ["true"]}}
  - {name: load, after: [extract, weekly], on_parent_failure: run, exec: {command: ["true"]}}
`)
	want := `load: after extract, weekly (on_parent_failure: run): once per tick of its parents, once they ended it
  2030-01-07T00:00:00Z
  2030-01-07T00:30:00Z
  2030-01-07T01:00:00Z
`
	if code, out, errs := runIn("next", "--config", cfg, "--job", "load", "-n", "3", "--from", "2030-01-06T23:30:00Z"); code != 0 || out != want {
		t.Errorf("next: %d %q\n got:\n%s\nwant:\n%s", code, errs, out, want)
	}
}
