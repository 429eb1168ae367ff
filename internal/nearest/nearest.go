// Package nearest finds the name a typo meant: the "did you mean" of
// baton's errors (flags, config keys, Go handlers, cron descriptors).
package nearest

import "strings"

// Name returns the name in names nearest to typed in edit distance, if it
// is near enough to be a typo (at most 2 edits, fewer than half the
// letters), or one of them starts with the other (at least 3 letters
// typed); "" when none is. Ties go to the earlier name.
func Name(typed string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if n == typed {
			continue
		}
		d := Distance(typed, n)
		if len(typed) >= 3 && (strings.HasPrefix(n, typed) || strings.HasPrefix(typed, n)) {
			d = min(d, 1)
		}
		if d < bestD && d*2 < max(len(typed), len(n)) {
			best, bestD = n, d
		}
	}
	return best
}

// Distance is the edit distance between a and b, in bytes: insertions,
// deletions, substitutions and transpositions of neighbours count one each.
func Distance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
