package nearest

import "testing"

func TestNameFindsTypos(t *testing.T) {
	names := []string{"tenant-report", "billing", "every", "hourly"}
	for typed, want := range map[string]string{
		"tenant-reprot": "tenant-report", // a transposition is one edit
		"biling":        "billing",
		"evry":          "every",
		"hour":          "hourly", // a prefix
		"x":             "",
		"nightly":       "",
		"billing":       "", // the name itself is no typo of it
	} {
		if got := Name(typed, names); got != want {
			t.Errorf("Name(%q) = %q, want %q", typed, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"abc", "", 3}, {"abc", "acb", 1}, {"kitten", "sitting", 3}} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
