package schedule

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// hashRange is the range an H picks from in each field of a 6-field spec
// (seconds first). The day of the month stops at 28, so that a job written
// "H H H * *" runs every month.
var hashRange = [6]struct {
	name   string
	lo, hi int
}{{"seconds", 0, 59}, {"minute", 0, 59}, {"hour", 0, 23}, {"day of month", 1, 28}, {"month", 1, 12}, {"day of week", 0, 6}}

// Hashed returns spec with each H in its fields replaced by a value
// derived from key (the job's name, or a runtime schedule's id), as
// Jenkins does: many jobs written "H * * * *" land on different minutes,
// and each job on the same minute on every replica and in every release.
// A field's element may be
//
//   - H: one value of the field's range (minute 0-59, hour 0-23, day of
//     month 1-28, month 1-12, day of week 0-6, seconds 0-59);
//   - H(A-B): one value in A-B, which must lie within the field's range
//     (day of month: 1-31);
//   - H/N or H(A-B)/N: every Nth value of the range from a first one
//     below A+N, written back as FIRST-B/N.
//
// Each field draws from its own hash of key, so "H H * * *" does not put
// the minute and the hour on the same number. A spec without H, and a
// descriptor (@daily, @every 5m), is returned as it is. An error names the
// field and what is wrong with its H.
func Hashed(spec, key string) (string, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case !strings.Contains(spec, "H"):
		return spec, nil
	case strings.HasPrefix(spec, "@") && hasHash(spec):
		return "", fmt.Errorf("schedule: %q: H is for the fields of a cron spec, not for a descriptor: write the fields (H * * * * for an hourly job spread over the hour)", spec)
	case strings.HasPrefix(spec, "@"):
		return spec, nil
	}
	fields := strings.Fields(spec)
	if len(fields) != 5 && len(fields) != 6 {
		return spec, nil // Parse says what is wrong
	}
	offset := 6 - len(fields) // a 5-field spec has no seconds
	changed := false
	for i, f := range fields {
		if !strings.Contains(f, "H") {
			continue
		}
		r := hashRange[i+offset]
		elems := strings.Split(f, ",")
		for j, e := range elems {
			if !strings.HasPrefix(e, "H") {
				continue
			}
			v, err := hashElement(e, r.lo, r.hi, hashOf(key, i+offset))
			if err != nil {
				return "", fmt.Errorf("schedule: %q: %s field %q: %w", spec, r.name, f, err)
			}
			elems[j], changed = v, true
		}
		fields[i] = strings.Join(elems, ",")
	}
	if !changed {
		return spec, nil
	}
	return strings.Join(fields, " "), nil
}

// hashOf is the hash an H of field (0 seconds ... 5 day of week) draws
// from: FNV-1a of key, a NUL and the field's number. It must not change
// between releases: it decides when each job runs.
func hashOf(key string, field int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))                  // never fails
	h.Write([]byte{0, byte('0' + field)}) // never fails
	return h.Sum64()
}

// hashElement expands one H element (H, H(A-B), H/N, H(A-B)/N) of a field
// whose values run lo to hi.
func hashElement(e string, lo, hi int, h uint64) (string, error) {
	body, step, hasStep := strings.Cut(e[1:], "/")
	a, b := lo, hi
	if body != "" {
		inner, ok := strings.CutPrefix(body, "(")
		inner, ok2 := strings.CutSuffix(inner, ")")
		from, to, ok3 := strings.Cut(inner, "-")
		if !ok || !ok2 || !ok3 {
			return "", errors.New("write H, H(A-B), H/N or H(A-B)/N")
		}
		var err1, err2 error
		a, err1 = strconv.Atoi(from)
		b, err2 = strconv.Atoi(to)
		max := hi
		if lo == 1 && hi == 28 {
			max = 31 // H's own range avoids 29-31; a range may name them
		}
		switch {
		case err1 != nil || err2 != nil:
			return "", errors.New("the range must be two numbers, A-B")
		case a > b:
			return "", errors.New("the range's start is after its end")
		case a < lo || b > max:
			return "", fmt.Errorf("the range must lie within %d-%d", lo, max)
		}
	}
	span := uint64(b - a + 1)
	if !hasStep {
		return strconv.Itoa(a + int(h%span)), nil
	}
	n, err := strconv.Atoi(step)
	switch {
	case err != nil || n < 1:
		return "", errors.New("the step after / must be a whole number of at least 1")
	case uint64(n) > span:
		return "", fmt.Errorf("a step of %d is longer than the range (%d values): write H(%d-%d) for one value", n, span, a, b)
	}
	first := a + int(h%uint64(n))
	return fmt.Sprintf("%d-%d/%d", first, b, n), nil
}

// hasHash reports whether a field of spec has an H element.
func hasHash(spec string) bool {
	for _, f := range strings.Fields(spec) {
		for _, e := range strings.Split(f, ",") {
			if strings.HasPrefix(e, "H") {
				return true
			}
		}
	}
	return false
}

// errHashNeedsKey is Parse's error for a spec with H: the value H stands
// for depends on the job, which Parse does not know.
var errHashNeedsKey = errors.New("H picks a value from the job's name: it is read where the job is (the job list, a runtime schedule, baton next --name)")
