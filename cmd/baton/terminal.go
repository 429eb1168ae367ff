package main

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/batonhq/baton/internal/redact"
)

// What the commands print of Redis (statuses, reasons, output lines, notes,
// who paused, replica ids, versions, queue names, job list differences,
// warnings and errors that quote them) was chosen by whoever can write to
// Redis, and reaches the operator's terminal. Every table and line of it is
// printed through printf or a table, which make each value inert
// (redact.Inert: ESC shows as \x1b, a newline as \n): printed text moves no
// cursor, clears no line and forges no row. The commands' own words and
// layout (the format, the tabs between cells) are what stays live.

// printf writes format and args to w as fmt.Fprintf does, each string
// argument (of any string type: jobs.Status too) made inert; an error's text is made inert line by line, its newlines kept
// (errors.Join writes one error per line).
func printf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, inertArgs(args)...)
}

// inertArgs returns args with every string made inert.
func inertArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case error:
			lines := strings.Split(v.Error(), "\n")
			for j, l := range lines {
				lines[j] = redact.Inert(l)
			}
			out[i] = strings.Join(lines, "\n")
		case []string:
			s := make([]string, len(v))
			for j, x := range v {
				s[j] = redact.Inert(x)
			}
			out[i] = s
		default:
			if rv := reflect.ValueOf(a); rv.IsValid() && rv.Kind() == reflect.String {
				out[i] = redact.Inert(rv.String())
			} else {
				out[i] = a
			}
		}
	}
	return out
}

// table prints aligned columns (a tabwriter: two spaces between columns)
// whose every cell is made inert, so a tab or newline inside a value
// neither adds a column nor starts a row.
type table struct {
	tw *tabwriter.Writer
}

// newTable starts a table on w under header, its column titles.
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row adds a row of cells.
func (t *table) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			_, _ = io.WriteString(t.tw, "\t")
		}
		_, _ = io.WriteString(t.tw, redact.Inert(c))
	}
	_, _ = io.WriteString(t.tw, "\n")
}

// flush writes the table out.
func (t *table) flush() error { return t.tw.Flush() }
