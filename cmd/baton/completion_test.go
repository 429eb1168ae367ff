package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/batonhq/baton/internal/redistest"
)

// complete runs the completion the shell scripts ask for (cobra's hidden
// __complete command) and returns the candidates.
func complete(t *testing.T, env []string, args ...string) []string {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	code, out, errs := runIn(append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %q: exit %d, %s", args, code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; last != ":4" { // ShellCompDirectiveNoFileComp
		t.Errorf("__complete %q: directive %q, want :4 (no file names)", args, last)
	}
	return lines[:len(lines)-1]
}

// Job-name arguments and --job complete from the config the command would
// read: --config, else $BATON_CONFIG; names already given are not offered
// again, and a command that takes one job stops after it.
func TestCompletionOffersTheConfigsJobNames(t *testing.T) {
	cfg := writeConfig(t, `redis: {url: "redis://127.0.0.1:1/0"}
jobs:
  - {name: report, schedule: "@daily", exec: {command: [make, "${SECRET_NOT_SET}"]}}
  - {name: rebuild, schedule: "@hourly", exec: {command: ["true"]}}
  - {name: cleanup, schedule: "@hourly", exec: {command: ["true"]}}
`)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"pause", "--config", cfg, "re"}, "report rebuild"},
		{nil, []string{"pause", "--config", cfg, "report", ""}, "rebuild cleanup"},
		{nil, []string{"resume", "--config", cfg, ""}, "report rebuild cleanup"},
		{nil, []string{"trigger", "--config", cfg, "c"}, "cleanup"},
		{nil, []string{"history", "--config", cfg, ""}, "report rebuild cleanup"},
		{nil, []string{"history", "--config", cfg, "report", ""}, ""},
		{nil, []string{"backfill", "--config", cfg, "--from", "2026-01-01T00:00:00Z", "r"}, "report rebuild"},
		{nil, []string{"next", "--config", cfg, "--job", ""}, "report rebuild cleanup"},
		{nil, []string{"next", "@daily", "--dst", ""}, "vixie once skip both"},
		{nil, []string{"skip", "--config", cfg, "r"}, "report rebuild"},
		{[]string{"BATON_CONFIG=" + cfg}, []string{"pause", "cl"}, "cleanup"},
		{[]string{"BATON_CONFIG=" + cfg + ".missing"}, []string{"pause", ""}, ""},
		{nil, []string{"status", ""}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if got := strings.Join(complete(t, tc.env, tc.args...), " "); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// baton completion writes the scripts of bash, zsh and fish.
func TestCompletionScripts(t *testing.T) {
	t.Parallel()
	for shell, want := range map[string]string{"bash": "# bash completion V2 for baton", "zsh": "#compdef baton", "fish": "# fish completion for baton"} {
		code, out, errs := runIn("completion", shell)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, stderr %q, stdout starts %.80q", shell, code, errs, out)
		}
	}
}

// A command that refuses singletons is not offered one; "@" completes the
// runtime schedules' job names, and schedules get|delete their ids, from
// Redis.
func TestCompletionOffersWhatEachCommandTakes(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: stest
jobs:
  - {name: report, schedule: "@daily", exec: {command: ["true"]}}
  - {name: pump, mode: singleton, exec: {command: ["true"]}}
`, srv.Addr()))
	for _, id := range []string{"report/tenant-1", "report/tenant-2", "other/x"} {
		if code, out, errs := runIn("schedules", "put", "--config", cfg, id, "--schedule", "@hourly", "--handler", "report"); code != 0 {
			t.Fatalf("put: %d %q %q", code, out, errs)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trigger", "--config", cfg, ""}, "report"},
		{[]string{"ticks", "--config", cfg, ""}, "report"},
		{[]string{"history", "--config", cfg, ""}, "report pump"},
		{[]string{"history", "--config", cfg, "@rep"}, "@report/tenant-1 @report/tenant-2"},
		{[]string{"trigger", "--config", cfg, "@report/tenant-1", "@report/"}, "@report/tenant-2"},
		{[]string{"schedules", "get", "--config", cfg, "o"}, "other/x"},
		{[]string{"schedules", "delete", "--config", cfg, "report/tenant-2", ""}, ""},
		{[]string{"schedules", "pause", "--config", cfg, "report/tenant-2", "report/"}, "report/tenant-1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if got := strings.Join(complete(t, nil, tc.args...), " "); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
