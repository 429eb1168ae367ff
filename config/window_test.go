package config

import (
	"strings"
	"testing"
	"time"
)

// A job's start and end bound its ticks; bad ones are refused with the
// field and line named.
func TestJobStartAndEnd(t *testing.T) {
	c, err := Load([]byte(`redis: {url: "redis://127.0.0.1:6379/0"}
jobs:
  - name: campaign
    schedule: "0 9 * * *"
    timezone: Europe/Berlin
    start: "2026-12-01T00:00:00+01:00"
    end: "2026-12-03T23:59:59+01:00"
    exec: {command: ["true"]}
  - name: until
    schedule: "0 0 L * *"
    end: "2027-02-01T00:00:00Z"
    exec: {command: ["true"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Jobs[0].Sched
	var got []string
	for at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC); ; {
		if at = s.Next(at); at.IsZero() {
			break
		}
		got = append(got, at.UTC().Format(time.RFC3339))
	}
	if want := "2026-12-01T08:00:00Z 2026-12-02T08:00:00Z 2026-12-03T08:00:00Z"; strings.Join(got, " ") != want {
		t.Errorf("campaign ticks %v, want %s", got, want)
	}
	if n := c.Jobs[1].Sched.Next(time.Date(2027, 1, 31, 1, 0, 0, 0, time.UTC)); !n.IsZero() {
		t.Errorf("a tick after the end: %v", n)
	}
	for body, want := range map[string]string{
		`start: "tomorrow"`: `line 4: job "j": start: "tomorrow" is not an RFC 3339 time`,
		`start: "2026-12-02T00:00:00Z"
    end: "2026-12-01T00:00:00Z"`: `job "j": end: 2026-12-01T00:00:00Z is not after start`,
		`start: "2026-12-01T10:00:00Z"
    end: "2026-12-01T11:00:00Z"`: `job "j": schedule: "0 9 * * *" has no tick between start and end`,
	} {
		_, err := Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - name: j\n    " + body + "\n    schedule: \"0 9 * * *\"\n    exec: {command: [\"true\"]}\n"))
		if err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(want, "line 4: ")) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	_, err = Load([]byte("redis: {url: \"redis://127.0.0.1:6379/0\"}\njobs:\n  - {name: p, mode: singleton, start: \"2026-12-01T00:00:00Z\", exec: {command: [\"true\"]}}\n"))
	if err == nil || !strings.Contains(err.Error(), "start: not for mode: singleton") {
		t.Errorf("a singleton with a start: %v", err)
	}
}
