package main

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// A flag the command does not take is refused with what to type instead:
// the flag of this command nearest in spelling, else the command that takes
// it, else this command's flags; and the command's usage line.
func TestUnknownFlagSaysWhatToType(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, twoJobs)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pause", "a", "--notes", "vendor fix"}, "baton pause: unknown flag --notes for baton pause; did you mean --note?\nusage: baton pause [--config FILE] [--note TEXT] [--by NAME] [--for DURATION | --until TIME] JOB...\n"},
		{[]string{"history", "a", "--confg", cfg}, "did you mean --config?\nusage: baton history "},
		{[]string{"next", "--jbo", "a"}, "unknown flag --jbo for baton next; did you mean --job?"},
		{[]string{"status", "--dry-run"}, "unknown flag --dry-run for baton status; --dry-run is a flag of baton backfill\n"},
		{[]string{"validate", "--xyzzy"}, "unknown flag --xyzzy for baton validate; its flags are --config, --print\n"},
		{[]string{"version", "--short"}, "unknown flag --short for baton version; it takes no flags\nusage: baton version\n"},
		{[]string{"history", "a", "-x"}, "unknown flag -x for baton history"},
		{[]string{"history", "a", "-n"}, "flag --n needs a value: --n N\n"},
		{[]string{"history", "a", "-n", "five"}, `invalid value "five" for --n: `},
		{[]string{"--config", cfg, "statsu"}, `"--config" before the command`},
		{[]string{"statsu"}, "unknown command \"statsu\"\ndid you mean baton status?\n"},
	} {
		code, _, errs := runIn(tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("baton %q: exit %d, stderr %q; want %d and %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
}

// A flag of a sibling subcommand is named with the command that takes it
// as it is typed: "baton schedules put", not "baton put" (which is no
// command).
func TestUnknownFlagOfASubcommandNamesTheCommandThatTakesItWhole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"schedules", "delete", "--schedule", "@hourly", "x"}, "unknown flag --schedule for baton schedules delete; --schedule is a flag of baton schedules put\n"},
		{[]string{"schedules", "get", "--prefix", "a", "x"}, "unknown flag --prefix for baton schedules get; --prefix is a flag of baton schedules export, baton schedules list\n"},
	} {
		code, _, errs := runIn(tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("baton %q: exit %d, stderr %q; want %d and %q", tc.args, code, errs, exitUsage, tc.want)
		}
	}
}

// Flags go before or after the positional arguments, also the flags Go's
// flag package spelt with one dash; "--" ends them.
func TestFlagsBeforeOrAfterArguments(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, twoJobs)
	want := "a: \"@every 1m\" in UTC\n  2026-01-01T00:01:00Z\n"
	for _, args := range [][]string{
		{"next", "--config", cfg, "--job", "a", "-n", "1", "--from", "2026-01-01T00:00:00Z"},
		{"next", "--job", "a", "--from", "2026-01-01T00:00:00Z", "-n", "1", "--config", cfg},
		{"next", "-config", cfg, "-job=a", "-n=1", "-from", "2026-01-01T00:00:00Z"},
		{"next", "--config=" + cfg, "--job=a", "-n1", "--from=2026-01-01T00:00:00Z"},
	} {
		if code, out, errs := runIn(args...); code != 0 || out != want {
			t.Errorf("baton %q: exit %d, stdout %q, stderr %q; want %q", args, code, out, errs, want)
		}
	}
	if code, out, _ := runIn("validate", cfg, "--print"); code != 0 || !strings.Contains(out, "ok: 2 jobs") || !strings.Contains(out, "jobs:") {
		t.Errorf("validate FILE --print: exit %d, %q", code, out)
	}
	// after "--", a job name that looks like a flag is an argument
	if code, _, errs := runIn("history", "--config", cfg, "--", "--json"); code != exitUsage || !strings.Contains(errs, `no job "--json"`) {
		t.Errorf("history -- --json: exit %d, %q", code, errs)
	}
}

// baton lock takes its flags before and after KEY; after "--" everything is
// CMD's, flags included.
func TestLockDashDashEndsFlags(t *testing.T) {
	t.Parallel()
	cfg, help, err := parseLock([]string{"--redis", "redis://127.0.0.1:1/0", "k", "--ttl", "7s", "--", "sh", "-c", "x", "--ttl", "1s", "--", "-h"}, io.Discard)
	if help || err != nil {
		t.Fatalf("help %v, err %v", help, err)
	}
	if cfg.key != "k" || cfg.ttl.String() != "7s" || !slices.Equal(cfg.argv, []string{"sh", "-c", "x", "--ttl", "1s", "--", "-h"}) {
		t.Fatalf("key %q ttl %v argv %q", cfg.key, cfg.ttl, cfg.argv)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "--", "true"}, "missing KEY"},
		{[]string{"lock", "k", "--tll", "1s", "--", "true"}, "unknown flag --tll for baton lock; did you mean --ttl?\nusage: baton lock "},
		{[]string{"lock", "--redis", "redis://u:hunter2@127.0.0.1:1", "--ttl", "redis://u:hunter2@h:1", "k", "--", "true"}, "invalid value"},
	} {
		code, _, errs := runIn(tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || strings.Contains(errs, "hunter2") {
			t.Errorf("baton %q: exit %d, stderr %q; want %d and %q, no password", tc.args, code, errs, exitUsage, tc.want)
		}
	}
}
