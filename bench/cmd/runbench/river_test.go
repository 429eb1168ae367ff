package main

import (
	"strings"
	"testing"
	"time"
)

func TestCronSpecFiresOnEveryEpochAlignedMultipleOfThePeriod(t *testing.T) {
	from := time.Date(2026, 11, 28, 10, 7, 13, 500_000_000, time.UTC)
	for _, period := range []time.Duration{time.Second, 20 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute} {
		spec, err := cronSpec(period)
		if err != nil {
			t.Fatalf("%v: %v", period, err)
		}
		s, err := cronParser.Parse(spec)
		if err != nil {
			t.Fatalf("%v: spec %q: %v", period, spec, err)
		}
		want := nextInstant(from, period)
		for k := range 3 {
			got := s.Next(want.Add(-time.Nanosecond))
			if k == 0 {
				got = s.Next(from)
			}
			if !got.Equal(want) {
				t.Fatalf("period %v (%q): next %v, want %v", period, spec, got, want)
			}
			want = want.Add(period)
		}
	}
}

func TestCronSpecRefusesPeriodsThatDoNotAlign(t *testing.T) {
	for _, period := range []time.Duration{7 * time.Second, 1500 * time.Millisecond, 7 * time.Minute} {
		if _, err := cronSpec(period); err == nil {
			t.Fatalf("period %v: no error", period)
		}
	}
}

func TestInsertErrorsRecordsTheEnqueuersFailedInsertsFromReplicaLogs(t *testing.T) {
	log := `time=2026-11-28T23:34:33.586Z level=ERROR msg="Client: Failed to send job insert notification" queues=default err="timeout: context already done: context deadline exceeded"
time=2026-11-28T23:34:33.586Z level=ERROR msg="maintenance.PeriodicJobEnqueuer: Error inserting periodic jobs" error="timeout: context already done: context deadline exceeded" num_jobs=100000
time=2026-11-28T23:35:42.592Z level=ERROR msg="producer: Error fetching jobs" err="StandardPilot.JobGetAvailable timed out after 10s: timeout: context deadline exceeded" queue=default
`
	e := &insertErrors{}
	e.scan(strings.NewReader(log))
	if len(e.fails) != 1 || e.fails[0].jobs != 100000 || !e.fails[0].at.Equal(time.Date(2026, 11, 28, 23, 34, 33, 586_000_000, time.UTC)) {
		t.Fatalf("fails %+v, want one of 100000 jobs at 23:34:33.586", e.fails)
	}
	if len(e.logged) != 3 || e.logged["producer: Error fetching jobs"] != 1 {
		t.Fatalf("logged %v, want 3 messages once each", e.logged)
	}
}
