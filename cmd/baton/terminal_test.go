package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/batonhq/baton/jobs"
)

// printf makes every string argument inert, of any string type, and an
// error line by line (its newlines kept); numbers and the format stay as
// they are.
func TestPrintfMakesRedisTextInert(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printf(&b, "%s|%s|%d|%v|%s\n", "a\x1b[2Kb", jobs.Status("\x1b[1G ok"), 7,
		errors.Join(errors.New("master 0: \x1b]0;t\a"), errors.New("master 1: down")), []string{"q\t1"})
	want := "a\\x1b[2Kb|\\x1b[1G ok|7|master 0: \\x1b]0;t\\a\nmaster 1: down|[q\\t1]\n"
	if b.String() != want {
		t.Errorf("printf wrote %q, want %q", b.String(), want)
	}
}

// A table's cells are inert: a tab or newline inside a value adds no
// column and starts no row.
func TestTableCellsAreInert(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	tw := newTable(&b, "A", "B")
	tw.row("x\ty\nz", "\x1b[2J")
	if err := tw.flush(); err != nil {
		t.Fatal(err)
	}
	want := "A        B\nx\\ty\\nz  \\x1b[2J\n"
	if b.String() != want {
		t.Errorf("table wrote %q, want %q", b.String(), want)
	}
}
