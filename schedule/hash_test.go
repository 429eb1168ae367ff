package schedule

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The values H stands for are part of baton's contract: a job runs at the
// same minute after an upgrade. These are the values of this release.
func TestHashedValuesAreStable(t *testing.T) {
	for _, tc := range []struct{ spec, key, want string }{
		{"H * * * *", "report", "4 * * * *"},
		{"H H * * *", "report", "4 1 * * *"},
		{"H/15 * * * *", "report", "4-59/15 * * * *"},
		{"H(0-29) H(9-17) * * 1-5", "billing", "23 15 * * 1-5"},
		{"H H/2 H(1-31) H H", "x", "40 1-23/2 17 8 0"},
		{"30 H * * *", "nightly", "30 20 * * *"},
	} {
		got, err := Hashed(tc.spec, tc.key)
		if err != nil {
			t.Fatalf("Hashed(%q, %q): %v", tc.spec, tc.key, err)
		}
		if got != tc.want {
			t.Errorf("Hashed(%q, %q) = %q, want %q: a job written with H would move", tc.spec, tc.key, got, tc.want)
		}
	}
}

// Every expansion is a spec Parse accepts, whose ticks are the ones of
// the H form: each H value lies in its range, H/N gives every Nth value
// from a first one below N.
func TestHashedExpandsWithinEachRange(t *testing.T) {
	for i := range 2000 {
		key := fmt.Sprintf("job-%d", i)
		for _, spec := range []string{"H * * * *", "H H * * *", "H/15 * * * *", "H(0-29)/10 H(9-17) * * *", "H H H(1-31) H H", "H H H H * *", "0 H/3 * * *"} {
			got, err := Hashed(spec, key)
			if err != nil {
				t.Fatalf("Hashed(%q, %q): %v", spec, key, err)
			}
			if strings.Contains(got, "H") {
				t.Fatalf("Hashed(%q, %q) = %q still holds an H", spec, key, got)
			}
			if _, err := Parse(got, time.UTC); err != nil {
				t.Fatalf("Hashed(%q, %q) = %q, which Parse refuses: %v", spec, key, got, err)
			}
		}
	}
}

// H spreads: 600 jobs written "H * * * *" land on most of the 60 minutes,
// none holding more than a few times its share.
func TestHashedSpreadsJobsOverTheField(t *testing.T) {
	count := map[string]int{}
	for i := range 600 {
		got, _ := Hashed("H * * * *", fmt.Sprintf("tenant-%d-report", i))
		count[strings.Fields(got)[0]]++
	}
	if len(count) < 55 {
		t.Errorf("600 jobs landed on %d minutes, want nearly all 60", len(count))
	}
	for m, n := range count {
		if n > 30 {
			t.Errorf("minute %s holds %d of 600 jobs (share 10)", m, n)
		}
	}
	// the fields draw apart: minute and hour are not the same number for
	// most jobs
	same := 0
	for i := range 600 {
		got, _ := Hashed("H H * * *", fmt.Sprintf("j%d", i))
		f := strings.Fields(got)
		if f[0] == f[1] {
			same++
		}
	}
	if same > 60 {
		t.Errorf("%d of 600 jobs got the same minute and hour", same)
	}
}

func TestHashedRefusesWhatItCannotExpand(t *testing.T) {
	for spec, want := range map[string]string{
		"H(30-10) * * * *":  "start is after its end",
		"H(0-60) * * * *":   "within 0-59",
		"H(a-b) * * * *":    "two numbers",
		"H(5) * * * *":      "write H, H(A-B)",
		"H/0 * * * *":       "at least 1",
		"H/x * * * *":       "at least 1",
		"H(0-9)/20 * * * *": "longer than the range",
		"* * H(0-32) * *":   "within 1-31",
		"* * * * H(0-7)":    "within 0-6",
		"* H(0-24) * * *":   "hour field",
		"@every H":          "not for a descriptor",
	} {
		_, err := Hashed(spec, "j")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Hashed(%q) = %v, want an error saying %q", spec, err, want)
		}
	}
	for _, spec := range []string{"@daily", "@every 5m", "0 9 * * THU", "*/5 * * * *"} {
		if got, err := Hashed(spec, "j"); err != nil || got != spec {
			t.Errorf("Hashed(%q) = %q, %v; want it unchanged", spec, got, err)
		}
	}
	if _, err := Parse("H * * * *", time.UTC); err == nil || !strings.Contains(err.Error(), "job's name") {
		t.Errorf("Parse of an H spec = %v, want it to say H needs the job's name", err)
	}
}
