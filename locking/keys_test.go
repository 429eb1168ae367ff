package locking

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// keyTable returns the keys docs/operating.md's key table says owner's
// keys.go builds, their placeholders filled in by fill.
func keyTable(t *testing.T, owner string, fill *strings.Replacer) []string {
	t.Helper()
	b, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| Key (pattern) | Type |")
	if !ok {
		t.Fatal("docs/operating.md has no key table")
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
	return out
}

// The key table in docs/operating.md lists exactly the keys keys.go builds,
// and the lock key and fence builders agree with keysFor.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	c := &Client{opts: options{prefix: "pre:"}}
	k := c.keysFor("name")
	if lockKey("pre:", "name") != k.lock || fenceKey("pre:", "name") != k.fence {
		t.Errorf("lockKey, fenceKey %q, %q; keysFor %q, %q", lockKey("pre:", "name"), fenceKey("pre:", "name"), k.lock, k.fence)
	}
	built := []string{k.lock, k.fence, sharesKey("pre:", "name"), (&Election{keys: c.keysFor(electionLock("name"))}).leaderKey(),
		markerKey("pre:"), wakeChannelOf("pre:")}
	doc := keyTable(t, "locking", strings.NewReplacer("PREFIX", "pre:", "NAME", "name"))
	slices.Sort(built)
	slices.Sort(doc)
	if !slices.Equal(built, doc) {
		t.Errorf("keys.go builds\n%q\nthe key table lists\n%q", built, doc)
	}
}
