package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batonhq/baton/internal/poll"
	"github.com/batonhq/baton/internal/redistest"
)

// ticksIn reads the ticks a job wrote, one RFC 3339 instant a line.
func ticksIn(t *testing.T, path string) []time.Time {
	t.Helper()
	data, _ := os.ReadFile(path)
	var out []time.Time
	for _, l := range strings.Fields(string(data)) {
		at, err := time.Parse(time.RFC3339, l)
		if err != nil {
			t.Fatalf("%s: %q", path, l)
		}
		out = append(out, at)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// A config reload (SIGHUP at the instant of a tick, and a file change seen
// by polling) takes effect without a restart: a removed job stops, an added
// one starts, a changed schedule switches, with no tick run twice and none
// lost at the switch; an invalid file is rejected with its errors logged
// and the running job list kept.
func TestReloadSwitchesJobListsWithoutLosingTicks(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	write := func(jobs string) {
		t.Helper()
		cfg := fmt.Sprintf("redis: {url: \"redis://%s/0\"}\nlocking: {fresh_deployment: true}\nnamespace: reload\nworker: {shutdown_grace: 5s}\njobs:\n%s", srv.Addr(), jobs)
		if err := os.WriteFile(dir+"/baton.yaml", []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	job := func(name, schedule string) string {
		return fmt.Sprintf("  - name: %s\n    schedule: %q\n    concurrency: allow\n    exec: {command: [sh, -c, 'echo $BATON_TICK >> %s/%s']}\n", name, schedule, dir, name)
	}
	write(job("keep", "@every 1s") + job("gone", "@every 1s") + job("moved", "@every 1s"))
	p := start(t, nil, "run", "--config", dir+"/baton.yaml", "--http", "")
	poll.Require(t, 20*time.Second, "three ticks of each job", func() bool {
		return len(ticksIn(t, dir+"/gone")) >= 3 && len(ticksIn(t, dir+"/moved")) >= 3
	})
	// reload at the instant of a tick: moved's schedule changes, gone goes,
	// added comes
	write(job("keep", "@every 1s") + job("moved", "@every 2s") + job("added", "@every 1s"))
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second))) // real time: the next tick's instant
	switchAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !poll.Until(20*time.Second, func() bool {
		return strings.Contains(p.stderr.String(), "config reloaded") && len(ticksIn(t, dir+"/added")) >= 4
	}) {
		t.Fatalf("no reload logged and four ticks of the added job in 20s:\n%s", p.stderr.String())
	}
	// an invalid file: rejected, everything keeps running
	if err := os.WriteFile(dir+"/baton.yaml", []byte("jobs:\n  - name: keep\n    schedule: \"61 * * * *\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Require(t, 10*time.Second, "the rejected reload logged (polling the file)", func() bool {
		return strings.Contains(p.stderr.String(), "config reload rejected")
	})
	keepBefore := len(ticksIn(t, dir+"/keep"))
	poll.Require(t, 10*time.Second, "keep running after the rejected reload", func() bool {
		return len(ticksIn(t, dir+"/keep")) >= keepBefore+2
	})
	// Ticks dispatched just before now may still be on their way: a task of
	// "added" that the old replica's draining worker fetched is handed back
	// (its list lacks the job) and waits a retry poll. Wait until every tick
	// up to the cutoff ran; one lost at the switch never does.
	cutoff := time.Now().Add(-time.Second).Truncate(time.Second)
	gaps := func(name string) []string {
		var out []string
		var ticks []time.Time
		for _, at := range ticksIn(t, dir+"/"+name) {
			if !at.After(cutoff) {
				ticks = append(ticks, at)
			}
		}
		for i := 1; i < len(ticks); i++ {
			switch gap := ticks[i].Sub(ticks[i-1]); {
			case gap == 0:
				out = append(out, fmt.Sprintf("%s: tick %s ran twice", name, ticks[i].Format(time.RFC3339)))
			case gap > 2*time.Second:
				out = append(out, fmt.Sprintf("%s: no tick between %s and %s (lost at the switch?)", name, ticks[i-1].Format(time.RFC3339), ticks[i].Format(time.RFC3339)))
			}
		}
		if len(ticks) == 0 || cutoff.Sub(ticks[len(ticks)-1]) > 2*time.Second {
			out = append(out, fmt.Sprintf("%s: no tick in the 2s up to %s", name, cutoff.Format(time.RFC3339)))
		}
		return out
	}
	allGaps := func() []string {
		var out []string
		for _, name := range []string{"keep", "moved", "added"} {
			out = append(out, gaps(name)...)
		}
		return out
	}
	poll.Until(15*time.Second, func() bool { return len(allGaps()) == 0 })
	// the replaced replica stops once no queue holds a task of the removed
	// job (its last ticks ran), within the drain time
	poll.Until(15*time.Second, func() bool { return strings.Contains(p.stderr.String(), "the replaced replica stops") })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Errorf("exit %d", code)
	}
	stderr := p.stderr.String()
	if !strings.Contains(stderr, `"removed":"gone"`) || !strings.Contains(stderr, `"added":"added"`) || !strings.Contains(stderr, `"changed":"moved"`) {
		t.Errorf("the reload line does not name the jobs:\n%s", grepLines(stderr, "config reload"))
	}
	t.Logf("%s", grepLines(stderr, "replaced replica"))
	if !strings.Contains(stderr, "the replaced replica stops: nothing left that only it runs") {
		t.Errorf("the replaced replica did not stop once drained:\n%s", grepLines(stderr, "replaced replica"))
	}
	if g := allGaps(); len(g) > 0 {
		t.Errorf("ticks up to %s, 15s later:\n%s\nlog lines of the added job:\n%s", cutoff.Format(time.RFC3339),
			strings.Join(g, "\n"), grepLines(stderr, `"job":"added"`))
	}
	if strings.Contains(stderr, "archiving a task") {
		t.Errorf("a tick dispatched at the switch was archived, not run:\n%s", grepLines(stderr, "archiving"))
	}
	gone := ticksIn(t, dir+"/gone")
	if last := gone[len(gone)-1]; last.After(switchAt.Add(2 * time.Second)) {
		t.Errorf("the removed job still ran at %s, after the reload at %s", last.Format(time.RFC3339), switchAt.Format(time.RFC3339Nano))
	}
	for i := 1; i < len(gone); i++ {
		if gone[i].Equal(gone[i-1]) {
			t.Errorf("gone: tick %s ran twice", gone[i].Format(time.RFC3339))
		}
	}
	added := ticksIn(t, dir+"/added")
	if first := added[0]; first.Before(switchAt.Add(-time.Second)) {
		t.Errorf("the added job ran at %s, before the reload", first.Format(time.RFC3339))
	}
	moved := ticksIn(t, dir+"/moved")
	for _, at := range moved {
		if at.After(switchAt.Add(2*time.Second)) && at.Unix()%2 != 0 {
			t.Errorf("moved ran %s after the switch to @every 2s", at.Format(time.RFC3339))
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A calendar's file (calendars.NAME.file) is part of the job list: a
// reload after it changed (SIGHUP) reads it again, so a day taken out of
// an exclude calendar runs the job's ticks again without a restart.
func TestReloadReadsAChangedCalendarFile(t *testing.T) {
	t.Parallel()
	srv := redistest.New(t)
	dir := t.TempDir()
	today := time.Now().UTC()
	// today and tomorrow (the test may run across midnight), excluded
	days := today.Format(time.DateOnly) + "\n" + today.AddDate(0, 0, 1).Format(time.DateOnly) + "\n"
	if err := os.WriteFile(dir+"/off.txt", []byte(days), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`redis: {url: "redis://%s/0"}
locking: {fresh_deployment: true}
namespace: reloadcal
calendars:
  off: {file: off.txt}
jobs:
  - name: tick
    schedule: "@every 1s"
    exclude: [off]
    concurrency: allow
    exec: {command: [sh, -c, 'echo $BATON_TICK >> %s/tick']}
`, srv.Addr(), dir)
	if err := os.WriteFile(dir+"/baton.yaml", []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, nil, "run", "--config", dir+"/baton.yaml", "--http", "")
	time.Sleep(3 * time.Second) // real time: ticks that must not come
	if n := len(ticksIn(t, dir+"/tick")); n != 0 {
		t.Fatalf("%d ticks ran on an excluded day", n)
	}
	// the days are no longer excluded: the file changes, the config does not
	if err := os.WriteFile(dir+"/off.txt", []byte("2020-01-01\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !poll.Until(15*time.Second, func() bool { return len(ticksIn(t, dir+"/tick")) >= 2 }) {
		t.Errorf("no tick ran in 15s after the calendar file dropped today and SIGHUP; reload log:\n%s", grepLines(p.stderr.String(), "reload"))
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 30*time.Second)
}
