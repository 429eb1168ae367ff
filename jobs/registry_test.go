package jobs_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/batonhq/baton/jobs"
)

func TestRegistry(t *testing.T) {
	r := jobs.NewRegistry()
	h := jobs.HandlerFunc(func(context.Context, jobs.Run) error { return nil })
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"report.daily_v-2", true},
		{strings.Repeat("x", 64), true},
		{strings.Repeat("x", 65), false},
		{"", false},
		{"Upper", false},
		{"with space", false},
		{"slash/name", false},
		{"ünicode", false},
	} {
		err := r.Register(tc.name, h)
		if (err == nil) != tc.ok {
			t.Errorf("Register(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if err := r.Register("a", h); err == nil {
		t.Error("duplicate name accepted")
	}
	if err := r.Register("nil", nil); err == nil {
		t.Error("nil handler accepted")
	}
	if err := r.HandleFunc("fn", nil); err == nil {
		t.Error("nil func accepted")
	}
	if err := r.HandleFunc("fn", func(context.Context, jobs.Run) error { return nil }); err != nil {
		t.Error(err)
	}
	if _, ok := r.Lookup("report.daily_v-2"); !ok {
		t.Error("Lookup of a registered name failed")
	}
	if _, ok := r.Lookup("missing"); ok {
		t.Error("Lookup of a missing name succeeded")
	}
	want := []string{"a", "fn", "report.daily_v-2", strings.Repeat("x", 64)}
	if got := r.Names(); !slices.Equal(got, want) {
		t.Errorf("Names = %q, want %q", got, want)
	}
}
