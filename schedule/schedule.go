package schedule

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	// Embedded zone data: every replica applies the same DST rules, whatever
	// its host's /usr/share/zoneinfo says.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Schedule yields the ticks of a job. Next returns the first tick strictly
// after the given instant, or the zero time if there is none.
//
// Every replica must compute the same ticks, so a Schedule depends only on its
// spec, its zone and the instant it is given: never on the current time or on
// when the process started.
type Schedule interface {
	Next(after time.Time) time.Time
}

// Func adapts a function to the Schedule interface.
type Func func(after time.Time) time.Time

// Next returns f(after).
func (f Func) Next(after time.Time) time.Time { return f(after) }

// parser accepts 5 fields (minute to day of week), 6 fields (with a leading
// seconds field) and descriptors (@daily, @every 5m, ...).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// fireHorizon bounds the search Parse does to reject specs that never
// fire. A cron spec that fires at all fires within any 41-year window: the
// sparsest ones are 29 February (at most 8 years apart, 2096 to 2104) and
// D#5 in February, 29 February on a given weekday (at most 40 years apart:
// a Friday in 2188, then in 2228).
const fireHorizon = 41 * 366 * 24 * time.Hour

// fireReference is the fixed instant from which Parse looks for a
// first tick, so that validation does not depend on when it runs.
var fireReference = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// Parse parses a cron spec evaluated in loc (nil means UTC).
//
// Accepted forms:
//
//   - 5 fields "minute hour day-of-month month day-of-week", or 6 fields with a
//     leading seconds field, as robfig/cron v3 parses them, and in the day
//     fields L (last day of the month), DL (last weekday D of the month),
//     D#N (Nth weekday D) and 7 for Sunday as in Vixie cron, beside
//     numbers, names, ranges and steps (see calendar.go);
//   - the descriptors @yearly (@annually), @monthly, @weekly, @daily
//     (@midnight) and @hourly;
//   - "@every D" with D a whole number of seconds, at least 1s. Its ticks are
//     the multiples of D since the Unix epoch: Next(t) is the smallest k*D
//     after t. They do not depend on loc nor on when a replica started.
//
// The zone comes from loc alone: a CRON_TZ= or TZ= prefix is rejected. loc
// should be a named zone (time.LoadLocation), not time.Local, which differs
// between hosts.
//
// Daylight saving time follows Vixie cron. A spec is fixed-time when its
// minute, hour and seconds fields are single values or lists of values (no *,
// ?, step or range); @yearly, @monthly, @weekly and @daily are fixed-time,
// @hourly is not. For a fixed-time spec, a tick whose local wall time is
// skipped by a spring-forward transition runs at the moment of the jump (the
// first instant after the gap), and a wall time that a fall-back transition
// repeats runs once, at its first occurrence; a jumped tick that lands on
// another tick is one tick. Other specs follow absolute time: a tick is every
// instant whose local wall time matches, so "0 * * * *" fires once per real
// hour, twice at wall time 01:00 in a New York fall-back and not at all for the
// wall hour 02:00 that a spring-forward skips.
//
// Ticks are whole seconds and are returned in loc.
//
// A spec that never fires (such as "0 0 30 2 *") is rejected: its first tick
// after a fixed reference instant must come within 41 years, which every spec
// that fires at all satisfies ("0 0 * 2 5#5", 29 February on a Friday, fires
// in 2036, 2064, 2092 and 2104, then every 28 years up to 2188, then in 2228).
//
// H (a value picked from the job's name) is expanded by Hashed first: Parse
// refuses a spec that still holds one.
//
// Errors read `schedule: "<spec>": <reason>` and wrap robfig/cron's
// parse error where there is one.
func Parse(spec string, loc *time.Location) (Schedule, error) {
	return parseChecked(spec, loc, DSTVixie)
}

// parseChecked parses spec under dst and refuses a spec that never fires.
func parseChecked(spec string, loc *time.Location, dst DST) (Schedule, error) {
	s, err := parseSchedule(strings.TrimSpace(spec), loc, dst)
	if err != nil {
		return nil, fmt.Errorf("schedule: %q: %w", spec, err)
	}
	if next := s.Next(fireReference); next.IsZero() || next.Sub(fireReference) > fireHorizon {
		return nil, fmt.Errorf("schedule: %q: never fires", spec)
	}
	return s, nil
}

func parseSchedule(spec string, loc *time.Location, dst DST) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	switch {
	case spec == "":
		return nil, errors.New("empty spec")
	case strings.HasPrefix(spec, "CRON_TZ=") || strings.HasPrefix(spec, "TZ="):
		return nil, errors.New("a CRON_TZ= or TZ= prefix is not accepted: set the job's time zone instead")
	case hasHash(spec):
		return nil, errHashNeedsKey
	}
	if f := strings.Fields(spec); f[0] == "@every" {
		if dst != DSTVixie {
			return nil, fmt.Errorf("dst %q: @every follows absolute time (multiples of its interval since the epoch); dst is for cron specs", string(dst))
		}
		return parseEvery(strings.TrimSpace(strings.TrimPrefix(spec, "@every")), loc)
	}
	if inner, dom, dow, ok, err := calendarSpec(spec); err != nil {
		return nil, err
	} else if ok {
		s, err := parseSchedule(inner, loc, dst)
		if err != nil {
			return nil, err
		}
		return &calendarSchedule{inner: s, loc: loc, months: monthsOf(s), dom: dom, dow: dow}, nil
	}
	parsed, err := parser.Parse(spec)
	if err != nil {
		return nil, explainSpec(spec, err)
	}
	cs, ok := parsed.(*cron.SpecSchedule)
	if !ok { // unreachable: only @every yields another type
		return nil, fmt.Errorf("unexpected schedule type %T", parsed)
	}
	// Both kinds walk the wall clock with robfig/cron in a zone that has no
	// transitions (UTC), then map wall times to instants in loc.
	wall := *cs
	wall.Location = time.UTC
	switch {
	case dst != DSTVixie:
		return &dstSchedule{wall: &wall, loc: loc, dst: dst}, nil
	case isFixedTime(spec):
		return &fixedSchedule{wall: &wall, loc: loc}, nil
	}
	return &absoluteSchedule{wall: &wall, loc: loc}, nil
}

func parseEvery(ds string, loc *time.Location) (Schedule, error) {
	d, err := time.ParseDuration(ds)
	if err != nil {
		return nil, fmt.Errorf("@every: %w", err)
	}
	if d < time.Second || d%time.Second != 0 {
		return nil, fmt.Errorf("@every: interval %v is not a whole number of seconds of at least 1s", d)
	}
	return &everySchedule{every: int64(d / time.Second), loc: loc}, nil
}

// isFixedTime reports whether a spec that robfig/cron accepted is fixed-time:
// seconds (if present), minute and hour fields hold only numbers separated by
// commas. Of the descriptors, all but @hourly are.
func isFixedTime(spec string) bool {
	if strings.HasPrefix(spec, "@") {
		return spec != "@hourly"
	}
	fields := strings.Fields(spec)
	n := 2 // minute, hour
	if len(fields) == 6 {
		n = 3 // seconds, minute, hour
	}
	for _, f := range fields[:n] {
		for part := range strings.SplitSeq(f, ",") {
			if strings.Trim(part, "0123456789") != "" {
				return false
			}
		}
	}
	return true
}

// everySchedule ticks at the multiples of every seconds since the Unix epoch.
type everySchedule struct {
	every int64 // seconds, > 0
	loc   *time.Location
}

func (s *everySchedule) Next(after time.Time) time.Time {
	// The smallest k*every > after: after.Unix() rounds down, so
	// floor(after.Unix()/every)+1 is right with or without a fraction.
	sec := after.Unix()
	k := sec / s.every
	if sec%s.every != 0 && sec < 0 {
		k-- // floor division for instants before 1970
	}
	return time.Unix((k+1)*s.every, 0).In(s.loc)
}

// absoluteSchedule is a spec with a wildcard, step or range in its time
// fields: its ticks are the instants whose wall time in loc matches, so a
// repeated hour matches twice and a skipped hour never does. robfig/cron's own
// Next means to do this by stepping through local time, but it goes wrong
// around transitions that are not whole hours (Australia/Lord_Howe), so the
// ticks are found one zone period (constant UTC offset) at a time instead.
type absoluteSchedule struct {
	wall *cron.SpecSchedule // Location = time.UTC
	loc  *time.Location
}

func (s *absoluteSchedule) Next(after time.Time) time.Time {
	t := after.In(s.loc)
	// Within the zone period holding t, the first matching wall time after
	// t's is the answer, if the period lasts until then.
	w := nextSpec(s.wall, wallOf(t))
	for !w.IsZero() {
		_, offset := t.Zone()
		tick := w.Add(-time.Duration(offset) * time.Second)
		_, end := t.ZoneBounds()
		if end.IsZero() || tick.Before(end) {
			return tick.In(s.loc)
		}
		// Go on from the start of the next period: the first matching
		// wall time at or after the one it starts with.
		t = end.In(s.loc)
		w = nextSpec(s.wall, wallOf(t).Add(-time.Second))
	}
	return time.Time{}
}

// fixedSchedule is a fixed-time spec. wall evaluates the spec in UTC, which
// has no transitions, so its ticks are the matching wall times (read as
// local); each is mapped to an instant in loc by resolveWall.
type fixedSchedule struct {
	wall *cron.SpecSchedule // Location = time.UTC
	loc  *time.Location
}

func (s *fixedSchedule) Next(after time.Time) time.Time {
	// resolveWall is non-decreasing in the wall time, and the wall time of
	// after resolves to an instant at or before after (its first occurrence),
	// so the answer is the first matching wall time past after's wall time
	// that resolves past after. Only wall times of a repeated hour, already
	// run at their first occurrence, are passed over.
	w := wallOf(after.In(s.loc)).Truncate(time.Second)
	for {
		w = nextSpec(s.wall, w)
		if w.IsZero() {
			return w
		}
		if t := resolveWall(w, s.loc); t.After(after) {
			return t
		}
	}
}

// nextSpec is s.Next without robfig/cron's 5-year search limit, which would
// report no tick for 29 February from March 2096 (2100 is not a leap year).
func nextSpec(s *cron.SpecSchedule, after time.Time) time.Time {
	for range 2 {
		if t := s.Next(after); !t.IsZero() {
			return t
		}
		// robfig searched up to the end of year+5; go on from there.
		after = time.Date(after.Year()+5, time.December, 31, 23, 59, 59, 0, after.Location())
	}
	return time.Time{}
}

// wallOf returns t's local wall time as a UTC time with the same fields.
func wallOf(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	return time.Date(y, mo, d, h, mi, sec, t.Nanosecond(), time.UTC)
}

// resolveWall maps the wall time w (fields read from a UTC time) to the first
// instant in loc at which the wall clock reads w or later: w's only or first
// occurrence, or the moment of the jump if a spring-forward skips w.
func resolveWall(w time.Time, loc *time.Location) time.Time {
	y, mo, d := w.Date()
	h, mi, sec := w.Clock()
	t := time.Date(y, mo, d, h, mi, sec, 0, loc)
	switch got := wallOf(t); {
	case got.Equal(w):
		// w exists. If the previous zone period also shows w, w is repeated
		// and that earlier instant is its first occurrence.
		start, _ := t.ZoneBounds()
		if start.IsZero() {
			return t
		}
		_, prevOffset := start.Add(-time.Second).Zone()
		if early := w.Add(-time.Duration(prevOffset) * time.Second); early.Before(start) {
			return early.In(loc)
		}
		return t
	case got.After(w):
		// w is skipped and time.Date normalized it past the gap: the jump
		// is where t's zone period starts.
		start, _ := t.ZoneBounds()
		return start.In(loc)
	default:
		// w is skipped and time.Date normalized it before the gap: the
		// jump is where t's zone period ends.
		_, end := t.ZoneBounds()
		return end.In(loc)
	}
}

// Ticks returns s's ticks in (after, until], at most max of them.
func Ticks(s Schedule, after, until time.Time, max int) []time.Time {
	var ticks []time.Time
	for t := after; len(ticks) < max; {
		t = s.Next(t)
		if t.IsZero() || t.After(until) {
			break
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// shortestIntervalSample is how many ticks ShortestInterval looks at.
const shortestIntervalSample = 100

// ShortestInterval returns the shortest gap between consecutive ticks of s
// among the first 100 ticks after from, or 0 if s has fewer than two ticks
// there. It is an estimate for validating settings that must fit between
// ticks (jitter, starting deadline); a DST transition outside the sample can
// bring ticks closer (a fixed-time tick jumped onto the next one is merged,
// but "30 2,3 * * *" has ticks 30 minutes apart on a spring-forward day).
func ShortestInterval(s Schedule, from time.Time) time.Duration {
	var shortest time.Duration
	prev := s.Next(from)
	for i := 1; i < shortestIntervalSample && !prev.IsZero(); i++ {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(prev); shortest == 0 || gap < shortest {
			shortest = gap
		}
		prev = next
	}
	return shortest
}

// Jitter returns a stable offset in [0, max) for the job, derived from the
// FNV-1a hash of its name, so every replica computes the same one. It returns
// 0 if max <= 0.
func Jitter(job string, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(job)) // never fails
	return time.Duration(h.Sum64() % uint64(max))
}
