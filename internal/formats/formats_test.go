package formats

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// docs/operating.md's formats table lists every format of All, with its
// version and whether the value carries it, and nothing else.
func TestFormatsTableMatchesAll(t *testing.T) {
	b, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| Format | Version |")
	if !ok {
		t.Fatal("docs/operating.md has no formats table")
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[cells[0]] = cells
	}
	for _, f := range All {
		row, ok := rows[f.Name]
		if !ok {
			t.Errorf("format %q is not in the table", f.Name)
			continue
		}
		delete(rows, f.Name)
		if row[1] != strconv.Itoa(f.Version) {
			t.Errorf("%q: the table says version %s, formats says %d", f.Name, row[1], f.Version)
		}
		if carried := row[len(row)-1] != "implied"; carried != f.Carried {
			t.Errorf("%q: the table says %q, formats says carried=%v", f.Name, row[len(row)-1], f.Carried)
		}
	}
	for name := range rows {
		t.Errorf("the table lists %q, which formats.All does not", name)
	}
}

// The versions every replica of this release writes and reads. Bumping
// one is a format change an older replica misreads: add its upgrade path
// (roll or drain) to docs/operating.md and CHANGELOG.md, then this table.
func TestFormatVersions(t *testing.T) {
	want := map[string]int{
		"tick record": 1, "tick writer": 1, "tick skip": 1, "job mark": 1, "dispatch fence": 1, "counted mark": 1,
		"pause flag": 1, "quorum marker": 1, "tick binding": 1, "task payload": 2,
		"history event": 1, "roster entry": 2, "roster job list": 1, "roster clock step": 1, "tick ledger record": 1, "holder record": 1,
		"buffer entries": 1, "max_runs count": 1, "replace request": 1, "lock keys": 1, "forgotten floor": 1,
		"election leader record": 1, "runtime schedule record": 1, "runtime schedule change": 1, "runtime schedule mark": 1,
		"slot holder record": 1, "chain outcome record": 1,
	}
	if len(All) != len(want) {
		t.Errorf("%d formats, want %d", len(All), len(want))
	}
	for _, f := range All {
		if v, ok := want[f.Name]; !ok || v != f.Version {
			t.Errorf("%q is version %d, want %d", f.Name, f.Version, v)
		}
	}
}
