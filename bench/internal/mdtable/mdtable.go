// Package mdtable prints GitHub-flavoured markdown tables with padded columns,
// so they read well as plain text too.
package mdtable

import (
	"strings"
	"unicode/utf8"
)

// Table is a header row and data rows. Align holds one entry per column:
// 'l' (default) or 'r'.
type Table struct {
	Header []string
	Align  []byte
	Rows   [][]string
}

// Add appends a row; missing cells are left empty.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// String renders the table, one line per row, ending in a newline.
func (t *Table) String() string {
	n := len(t.Header)
	width := make([]int, n)
	for i, h := range t.Header {
		width[i] = max(3, utf8.RuneCountInString(h))
	}
	for _, r := range t.Rows {
		for i := 0; i < n && i < len(r); i++ {
			width[i] = max(width[i], utf8.RuneCountInString(r[i]))
		}
	}
	right := func(i int) bool { return i < len(t.Align) && t.Align[i] == 'r' }
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i := range n {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if right(i) {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|")
	for i := range n {
		if right(i) {
			b.WriteString(" " + strings.Repeat("-", width[i]-1) + ": |")
		} else {
			b.WriteString(" " + strings.Repeat("-", width[i]) + " |")
		}
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	return b.String()
}
