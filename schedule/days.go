package schedule

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A Calendar is a set of days: dates, ranges of dates and weekdays, read
// by their year, month and day in a job's zone (a business calendar:
// "holidays-de", "business-days"). The zero Calendar holds no day.
type Calendar struct {
	days     map[civil]bool
	ranges   [][2]civil // inclusive
	weekdays uint8      // bit d: time.Weekday d
}

// civil is a date without a zone.
type civil struct {
	y int
	m time.Month
	d int
}

func civilOf(t time.Time) civil {
	y, m, d := t.Date()
	return civil{y, m, d}
}

func (c civil) before(o civil) bool { return c.cmp(o) < 0 }

// cmp orders dates: -1 when c is first, 1 when o is, 0 when they are one.
func (c civil) cmp(o civil) int {
	switch {
	case c.y != o.y:
		return cmp.Compare(c.y, o.y)
	case c.m != o.m:
		return cmp.Compare(c.m, o.m)
	}
	return cmp.Compare(c.d, o.d)
}

// AddDate adds the day of d (its year, month and day; the zone is not read).
func (c *Calendar) AddDate(d time.Time) {
	if c.days == nil {
		c.days = map[civil]bool{}
	}
	c.days[civilOf(d)] = true
}

// AddRange adds the days from from to to, both included (their dates).
func (c *Calendar) AddRange(from, to time.Time) error {
	a, b := civilOf(from), civilOf(to)
	if b.before(a) {
		return fmt.Errorf("the range ends (%s) before it starts (%s)", to.Format(time.DateOnly), from.Format(time.DateOnly))
	}
	c.ranges = append(c.ranges, [2]civil{a, b})
	return nil
}

// AddWeekday adds every day that is w.
func (c *Calendar) AddWeekday(w time.Weekday) { c.weekdays |= 1 << uint(w) }

// Contains reports whether the day of t (its year, month and day, read in
// t's own location) is in c.
func (c *Calendar) Contains(t time.Time) bool {
	if c == nil {
		return false
	}
	if c.weekdays&(1<<uint(t.Weekday())) != 0 {
		return true
	}
	d := civilOf(t)
	if c.days[d] {
		return true
	}
	for _, r := range c.ranges {
		if !d.before(r[0]) && !r[1].before(d) {
			return true
		}
	}
	return false
}

// Days says which days a job's ticks may fall on: every day of each Only
// calendar (when there are any), and no day of an Exclude calendar.
type Days struct {
	Only    []*Calendar
	Exclude []*Calendar
}

// Allows reports whether the day of t (read in t's location) is one the
// ticks may fall on.
func (d Days) Allows(t time.Time) bool {
	for _, c := range d.Only {
		if !c.Contains(t) {
			return false
		}
	}
	return !slices.ContainsFunc(d.Exclude, func(c *Calendar) bool { return c.Contains(t) })
}

// daysHorizonYears bounds how far Next looks for a day Days allows.
const daysHorizonYears = 41

// OnDays returns s without the ticks whose day in loc days does not
// allow: a tick on an excluded day is not due at all (not missed). The
// ticks kept are s's own, at the same instants.
func OnDays(s Schedule, loc *time.Location, days Days) Schedule {
	if loc == nil {
		loc = time.UTC
	}
	return &daysSchedule{inner: s, loc: loc, days: days}
}

type daysSchedule struct {
	inner Schedule
	loc   *time.Location
	days  Days
}

func (s *daysSchedule) Next(after time.Time) time.Time {
	limit := after.AddDate(daysHorizonYears, 0, 0)
	for t := after; t.Before(limit); {
		n := s.inner.Next(t)
		if n.IsZero() {
			return n
		}
		local := n.In(s.loc)
		if s.days.Allows(local) {
			return n
		}
		// not this day: go on from the start of the next day allowed,
		// found on the calendars alone
		day := time.Date(local.Year(), local.Month(), local.Day()+1, 0, 0, 0, 0, time.UTC)
		for !s.days.Allows(day) {
			day = day.AddDate(0, 0, 1)
			if day.After(limit) {
				return time.Time{}
			}
		}
		// the day's first instant: its midnight's first occurrence when the
		// clocks show it twice (time.Date may give the second)
		t = resolveWall(day, s.loc).Add(-time.Nanosecond)
		if !t.After(n) { // a midnight before n (a fall-back across midnight)
			t = n
		}
	}
	return time.Time{}
}

// String lists c's days in one canonical form (equal sets of dates,
// ranges and weekdays print alike): what a replica compares to tell a
// calendar that differs between job lists.
func (c *Calendar) String() string {
	if c == nil {
		return ""
	}
	var b strings.Builder
	for w := range 7 {
		if c.weekdays&(1<<uint(w)) != 0 {
			b.WriteString(time.Weekday(w).String()[:3] + " ")
		}
	}
	days := make([]civil, 0, len(c.days))
	for d := range c.days {
		days = append(days, d)
	}
	slices.SortFunc(days, civil.cmp)
	for _, d := range days {
		fmt.Fprintf(&b, "%04d-%02d-%02d ", d.y, d.m, d.d)
	}
	ranges := slices.Clone(c.ranges)
	slices.SortFunc(ranges, func(a, b [2]civil) int { return cmp.Or(a[0].cmp(b[0]), a[1].cmp(b[1])) })
	for _, r := range ranges {
		fmt.Fprintf(&b, "%04d-%02d-%02d..%04d-%02d-%02d ", r[0].y, r[0].m, r[0].d, r[1].y, r[1].m, r[1].d)
	}
	return strings.TrimSpace(b.String())
}
