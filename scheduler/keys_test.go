package scheduler

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
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

// The key table in docs/operating.md lists exactly the keys keys.go builds.
func TestKeyTableMatchesKeyBuilders(t *testing.T) {
	k := newJobKeys("ns", "job")
	tick := k.tickKey(time.UnixMilli(1000))
	built := []string{tick, writerKey(tick), k.mark, k.fence, k.countedKey(2000), PauseKey("ns", "job"),
		(&Scheduler{opts: options{namespace: "ns"}}).membersKey()}
	doc := keyTable(t, "scheduler", strings.NewReplacer("NS", "ns", "JOB", "job", "<mark ms>", "2000", "<ms>", "1000"))
	slices.Sort(built)
	slices.Sort(doc)
	if !slices.Equal(built, doc) {
		t.Errorf("keys.go builds\n%q\nthe key table lists\n%q", built, doc)
	}
}
