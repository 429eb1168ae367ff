package childenv

import (
	"slices"
	"testing"
)

func TestFilter(t *testing.T) {
	env := []string{"PATH=/bin", "HOME=/root", "LC_ALL=C", "LCX=1", "REDISCLI_AUTH=s3cret", "BATON_REDIS_URL=redis://:pw@h",
		"AWS_SECRET_ACCESS_KEY=x", "APP_MODE=prod", "APP_X=1", "TZ=UTC", "USER=u", "LANG=C.UTF-8"}
	got := Filter(env, nil)
	want := []string{"PATH=/bin", "HOME=/root", "LC_ALL=C", "TZ=UTC", "USER=u", "LANG=C.UTF-8"}
	if !slices.Equal(got, want) {
		t.Errorf("default: %v, want %v", got, want)
	}
	got = Filter(env, []string{"APP_*", "AWS_SECRET_ACCESS_KEY"})
	if !slices.Contains(got, "APP_MODE=prod") || !slices.Contains(got, "APP_X=1") || !slices.Contains(got, "AWS_SECRET_ACCESS_KEY=x") ||
		slices.Contains(got, "REDISCLI_AUTH=s3cret") {
		t.Errorf("extra: %v", got)
	}
	if len(Filter(env, []string{"*"})) != len(env) {
		t.Errorf("* passes everything")
	}
	for _, bad := range []string{"", "A-B", "*X", "A*B", "1A"} {
		if Check(bad) == nil {
			t.Errorf("Check(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"A", "LC_*", "*", "_X1"} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q): %v", ok, err)
		}
	}
}
