// Package keytable reads the table of Redis keys in docs/operating.md, for
// the tests that check each package's keys.go against it. It is imported
// by tests only.
package keytable

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Rows returns the keys the table in the file doc (docs/operating.md, by a
// path relative to the test's package) says owner's keys.go builds: the
// rows whose owner cell starts "owner, keys.go", the first pattern of each
// with its placeholders filled in by fill, sorted.
func Rows(t testing.TB, doc, owner string, fill *strings.Replacer) []string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| Key (pattern) | Type |")
	if !ok {
		t.Fatalf("%s has no key table", doc)
	}
	var out []string
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[2]), owner+", keys.go") {
			continue
		}
		_, pattern, _ := strings.Cut(cells[0], "`")
		pattern, _, _ = strings.Cut(pattern, "`")
		out = append(out, fill.Replace(pattern))
	}
	slices.Sort(out)
	return out
}

// Check fails t unless built, the keys owner's keys.go builds, are the
// ones the table lists for it (in any order).
func Check(t testing.TB, doc, owner string, fill *strings.Replacer, built []string) {
	t.Helper()
	listed := Rows(t, doc, owner, fill)
	built = slices.Sorted(slices.Values(built))
	if !slices.Equal(built, listed) {
		t.Errorf("keys.go builds\n%q\nthe key table lists\n%q", built, listed)
	}
}
