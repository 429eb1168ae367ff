package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/batonhq/baton"
	"github.com/batonhq/baton/internal/redistest"
)

func TestPauseResume(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: ptest
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, srv.Addr()))
	rdb := srv.TestClient(t)
	ctx := context.Background()
	if code, out, errs := runIn("pause", "--config", cfg, "a"); code != 0 || !strings.HasPrefix(out, "a paused by ") {
		t.Fatalf("pause: %d %q %q", code, out, errs)
	}
	if n, _ := rdb.Exists(ctx, "ptest:{a}:paused").Result(); n != 1 {
		t.Fatal("pause flag not set")
	}
	if code, out, errs := runIn("resume", "--config", cfg, "a"); code != 0 || out != "a resumed\n" {
		t.Fatalf("resume: %d %q %q", code, out, errs)
	}
	if n, _ := rdb.Exists(ctx, "ptest:{a}:paused").Result(); n != 0 {
		t.Fatal("pause flag still set")
	}
	if code, _, errs := runIn("pause", "--config", cfg, "nope"); code != 2 || !strings.Contains(errs, `no job "nope"`) {
		t.Fatalf("pause unknown job: %d %q", code, errs)
	}
	if code, _, _ := runIn("pause", "--config", cfg); code != 2 {
		t.Fatalf("pause without a job: %d", code)
	}
	down := writeConfig(t, `redis:
  url: redis://:secret@127.0.0.1:1/0
locking:
  fresh_deployment: true
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`)
	if code, _, errs := runIn("pause", "--config", down, "a"); code != 1 || strings.Contains(errs, "secret") {
		t.Fatalf("pause with Redis down: %d %q", code, errs)
	}
}

// Pause is all or nothing: with one of three lock masters down it is
// written to the others (a majority: in effect), the command says which
// master missed it and exits 1; run again once the master is back, it
// repairs the rest.
func TestPausePartialAndRepair(t *testing.T) {
	t.Parallel()
	servers := redistest.NewN(t, 3)
	var urls []string
	for _, s := range servers {
		urls = append(urls, fmt.Sprintf("%q", "redis://"+s.Addr()+"/0"))
	}
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
  masters: [%s]
namespace: ptest
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, servers[0].Addr(), strings.Join(urls, ", ")))
	if err := servers[2].Stop(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runIn("pause", "--config", cfg, "a")
	if code != 1 || !regexp.MustCompile(`^a paused by .* \(on 2 of 3 lock masters: in effect`).MatchString(out) || !strings.Contains(errs, "lock master 2") {
		t.Fatalf("partial pause: %d %q %q", code, out, errs)
	}
	if err := servers[2].Restart(); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := runIn("pause", "--config", cfg, "a"); code != 0 || !strings.HasPrefix(out, "a paused by ") || strings.Contains(out, "lock masters") {
		t.Fatalf("pause again: %d %q %q", code, out, errs)
	}
	if n, _ := servers[2].TestClient(t).Exists(context.Background(), "ptest:{a}:paused").Result(); n != 1 {
		t.Fatal("the repaired master has no pause flag")
	}
}

// pause --note --by records who, since when and why; status shows them
// (table and --json); pause without --by names the OS user.
func TestPauseWithNote(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: pnote
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
  - name: b
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, srv.Addr()))
	code, out, errs := runIn("pause", "--config", cfg, "--note", "waiting for vendor fix", "--by", "alice", "a")
	if code != 0 || !regexp.MustCompile(`^a paused by "alice" since \S+Z: "waiting for vendor fix"\n$`).MatchString(out) {
		t.Fatalf("pause: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("pause", "--config", cfg, "b"); code != 0 || !strings.HasPrefix(out, "b paused by "+strconv.Quote(osUser())+" since ") {
		t.Fatalf("pause without --by: %d %q %q (OS user %q)", code, out, errs, osUser())
	}
	code, out, errs = runIn("status", "--config", cfg)
	if code != 0 || !regexp.MustCompile(`(?m)^a paused by "alice" since \S+Z \(\d+s ago\): "waiting for vendor fix"$`).MatchString(out) || !strings.Contains(out, "yes (alice)") {
		t.Errorf("status: %d %q %q", code, out, errs)
	}
	code, out, _ = runIn("status", "--config", cfg, "--json")
	var st baton.Status
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Jobs) != 2 {
		t.Fatalf("status --json: %d %q", code, out)
	}
	if a := st.Jobs[0]; !a.Paused || a.PausedBy != "alice" || a.PauseNote != "waiting for vendor fix" || a.PausedSince.IsZero() || st.Time.Sub(a.PausedSince) > time.Minute {
		t.Errorf("status --json: %+v", a)
	}
	if b := st.Jobs[1]; !b.Paused || b.PausedBy != osUser() || b.PauseNote != "" {
		t.Errorf("status --json: %+v", b)
	}
}

// Bad flags of pause and resume are usage errors (exit 2) that change
// nothing.
func TestPauseResumeFlags(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: pflags
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
  - name: l
    mode: local
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, srv.Addr()))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"resume", "--skip", "--catch-up", "a"}, "--skip and --catch-up exclude each other"},
		{[]string{"pause", "--note", strings.Repeat("n", 501), "a"}, "bad pause: the note is 501 bytes, over the limit of 500"},
		{[]string{"pause", "--by", "a\nb", "a"}, "one printable line"},
		{[]string{"pause", "--by", "", "a"}, "say who pauses it"},
		{[]string{"pause", "--catch-up", "a"}, "unknown flag --catch-up for baton pause; --catch-up is a flag of baton resume\nusage: baton pause "},
		{[]string{"resume", "--note", "x", "a"}, "unknown flag --note for baton resume; --note is a flag of baton pause, baton skip\nusage: baton resume "},
		{[]string{"resume", "--catch-up", "l"}, `job "l" is a local job: only cron jobs can catch up`},
	} {
		code, _, errs := runIn(append(tc.args[:1:1], append([]string{"--config", cfg}, tc.args[1:]...)...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("baton %q: %d %q, want exit 2 and %q", tc.args, code, errs, tc.want)
		}
	}
	if n := srv.TestClient(t).Exists(context.Background(), "pflags:{a}:paused").Val(); n != 0 {
		t.Error("a refused pause set the flag")
	}
}

// resume --catch-up says what it replayed and which paused ticks stay
// skipped; run again, it replays nothing (the claim finds them done).
func TestResumeCatchUpOutput(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: pcu
jobs:
  - name: a
    schedule: "@every 1m"
    starting_deadline: 5m
    exec: {command: ["true"]}
`, srv.Addr()))
	rdb := srv.TestClient(t)
	ctx := context.Background()
	if code, _, errs := runIn("pause", "--config", cfg, "--note", "n", "a"); code != 0 {
		t.Fatal(errs)
	}
	now := rdb.Time(ctx).Val().UTC().Truncate(time.Minute)
	in, old := now.Add(-time.Minute), now.Add(-10*time.Minute)
	// the pause began before both ticks
	key := "pcu:{a}:paused"
	v := strings.Replace(rdb.Get(ctx, key).Val(), `"at_ms":`, fmt.Sprintf(`"at_ms":%d,"was":`, now.Add(-time.Hour).UnixMilli()), 1)
	rdb.Set(ctx, key, v, 0)
	src, err := os.ReadFile("../../internal/runlog/lua/history_add.lua")
	if err != nil {
		t.Fatal(err)
	}
	add := redis.NewScript(string(src))
	for _, at := range []time.Time{old, in} {
		err := add.Run(ctx, rdb, []string{"pcu:{history:a}"}, 300, (7 * 24 * time.Hour).Milliseconds(),
			"ev", "not_run", "tick", at.Format(time.RFC3339Nano), "run", "", "status", "paused", "reason", "the job is paused").Err()
		if err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runIn("resume", "--config", cfg, "--catch-up", "a")
	want := fmt.Sprintf("a resumed\na: replayed 1 paused ticks: %s\na: stays skipped: %s (due more than the starting deadline (5m0s) ago)\n",
		in.Format(time.RFC3339), old.Format(time.RFC3339))
	if code != 0 || out != want {
		t.Fatalf("resume --catch-up: %d %q %q, want %q", code, out, errs, want)
	}
	code, out, errs = runIn("resume", "--config", cfg, "--catch-up", "a")
	if code != 0 || !strings.Contains(out, "a: replayed 0 paused ticks\na: 1 paused ticks were replayed already: "+in.Format(time.RFC3339)+"\n") {
		t.Fatalf("resume --catch-up again: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("resume", "--config", cfg, "--skip", "a"); code != 0 || out != "a resumed\n" {
		t.Fatalf("resume --skip: %d %q %q", code, out, errs)
	}
}

// baton pause --for and --until end the pause by themselves: the output
// and baton status say until when, the flag expires then; the two
// exclude each other, and an end that cannot be is a usage error.
func TestPauseForAndUntil(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: pfor
jobs:
  - name: a
    schedule: "@every 1m"
    exec: {command: ["true"]}
`, srv.Addr()))
	rdb := srv.TestClient(t)
	ctx := context.Background()
	code, out, errs := runIn("pause", "--config", cfg, "--for", "2h", "--note", "freeze", "a")
	if code != 0 || !strings.Contains(out, " until ") {
		t.Fatalf("pause --for 2h: %d %q %q", code, out, errs)
	}
	if ttl := rdb.PTTL(ctx, "pfor:{a}:paused").Val(); ttl <= 119*time.Minute || ttl > 2*time.Hour {
		t.Errorf("the flag's ttl is %s, want about 2h", ttl)
	}
	if code, out, errs := runIn("status", "--config", cfg); code != 0 || !regexp.MustCompile(`a paused by .* until \S+ \(in (1h59m|2h0m)`).MatchString(out) {
		t.Errorf("status: %d\n%s\n%s", code, out, errs)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	if code, out, errs := runIn("pause", "--config", cfg, "--until", until, "a"); code != 0 || !strings.Contains(out, " until "+until) {
		t.Fatalf("pause --until %s: %d %q %q", until, code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--for", "1h", "--until", until}, "--for and --until exclude each other"},
		{[]string{"--for", "-1h"}, "--for -1h0m0s: want a positive duration"},
		{[]string{"--until", "tomorrow"}, `--until "tomorrow": want an RFC 3339 time`},
		{[]string{"--until", "2020-01-01T00:00:00Z"}, "has passed"},
	} {
		code, _, errs := runIn(append(append([]string{"pause", "--config", cfg}, tc.args...), "a")...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("pause %v: %d %q, want exit 2 saying %q", tc.args, code, errs, tc.want)
		}
	}
}

// baton skip skips a job's next ticks, or those named, saying by whom and
// why; baton history shows them skipped; what it cannot skip is a usage
// error or, for a tick claimed already, exit 1 with why.
func TestSkipCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	cfg := writeConfig(t, fmt.Sprintf(`redis:
  url: redis://%s/0
locking:
  fresh_deployment: true
namespace: pskip
jobs:
  - name: a
    schedule: "0 * * * *"
    exec: {command: ["true"]}
  - name: pump
    mode: singleton
    exec: {command: ["true"]}
`, srv.Addr()))
	code, out, errs := runIn("skip", "--config", cfg, "--next", "2", "--by", "alice", "--note", "migration", "a")
	if code != 0 || strings.Count(out, "a: skipped ") != 2 || !strings.Contains(out, `by "alice": "migration"`) {
		t.Fatalf("skip --next 2: %d %q %q", code, out, errs)
	}
	if code, out, errs := runIn("history", "--config", cfg, "a"); code != 0 || strings.Count(out, "skipped by alice: migration") != 2 {
		t.Errorf("history after the skip: %d\n%s\n%s", code, out, errs)
	}
	next := time.Now().UTC().Truncate(time.Hour).Add(3 * time.Hour).Format(time.RFC3339)
	if code, out, errs := runIn("skip", "--config", cfg, "--tick", next, "a"); code != 0 || !strings.Contains(out, "a: skipped "+next) {
		t.Errorf("skip --tick %s: %d %q %q", next, code, out, errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--next", "1", "--tick", next, "a"}, "--next and --tick exclude each other"},
		{[]string{"--next", "0", "a"}, "--next 0: skip 1 to 100"},
		{[]string{"--tick", "soon", "a"}, `--tick "soon": want an RFC 3339 time`},
		{[]string{"--tick", "2030-01-01T00:30:00Z", "a"}, "is not a tick of job"},
		{[]string{"pump"}, "is a singleton"},
		{[]string{"nope"}, `no job "nope"`},
		{[]string{"a", "pump"}, "name one job"},
	} {
		code, _, errs := runIn(append([]string{"skip", "--config", cfg}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("skip %v: %d %q, want exit 2 saying %q", tc.args, code, errs, tc.want)
		}
	}
}
