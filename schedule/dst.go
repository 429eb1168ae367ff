package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// DST is how a job's cron spec meets the days a zone's clocks change: a
// wall time a spring-forward skips, and one a fall-back repeats.
type DST string

// The DST policies.
const (
	// DSTVixie follows Vixie cron, the default: a fixed-time spec (single
	// values in its seconds, minute and hour fields; every descriptor but
	// @hourly) runs a skipped time at the jump and a repeated one once;
	// any other spec follows absolute time (a skipped time does not run, a
	// repeated one runs in both copies).
	DSTVixie DST = "vixie"
	// DSTOnce runs every tick once, whatever the spec: a skipped time runs
	// at the jump (the first instant after the gap; several skipped times
	// are one tick there, also with a tick the jump lands on), a repeated
	// time at its first occurrence.
	DSTOnce DST = "once"
	// DSTSkip runs neither a skipped time nor the second copy of a
	// repeated one: never twice, never at a time the spec does not name.
	DSTSkip DST = "skip"
	// DSTBoth runs a repeated time in both copies and a skipped one at the
	// jump: every wall time the spec names, each time the clock shows it.
	DSTBoth DST = "both"
)

// Valid reports whether d is one of the policies ("" is not: the config
// sets the default).
func (d DST) Valid() bool {
	return d == DSTVixie || d == DSTOnce || d == DSTSkip || d == DSTBoth
}

// ParseDST is Parse with the DST policy dst ("" or DSTVixie: Parse's).
// "@every D" follows absolute time whatever dst says: any other policy
// than Vixie's is refused for it.
func ParseDST(spec string, loc *time.Location, dst DST) (Schedule, error) {
	switch {
	case dst == "":
		dst = DSTVixie
	case !dst.Valid():
		return nil, fmt.Errorf("schedule: dst %q: want vixie, once, skip or both", string(dst))
	}
	return parseChecked(spec, loc, dst)
}

// dstSchedule yields the ticks of a cron spec under a DST policy other
// than Vixie's. wall evaluates the spec in UTC (no transitions); each
// matching wall time is mapped to its instants in loc.
type dstSchedule struct {
	wall *cron.SpecSchedule // Location = time.UTC
	loc  *time.Location
	dst  DST
}

func (s *dstSchedule) Next(after time.Time) time.Time {
	switch s.dst {
	case DSTOnce:
		return (&fixedSchedule{wall: s.wall, loc: s.loc}).Next(after)
	case DSTBoth:
		// every copy of each wall time (absolute time) and the jumps
		// (first occurrences and jumps): their union
		a := (&absoluteSchedule{wall: s.wall, loc: s.loc}).Next(after)
		f := (&fixedSchedule{wall: s.wall, loc: s.loc}).Next(after)
		switch {
		case a.IsZero():
			return f
		case f.IsZero() || a.Before(f):
			return a
		}
		return f
	}
	// DSTSkip: first occurrences only, skipped wall times passed over
	w := wallOf(after.In(s.loc)).Truncate(time.Second)
	for {
		w = nextSpec(s.wall, w)
		if w.IsZero() {
			return w
		}
		if t := resolveWall(w, s.loc); t.After(after) && wallOf(t).Equal(w) {
			return t
		}
	}
}

// A Mark is a tick of a spec, or a time the spec names that its DST
// policy does not run, with how a clock change touched it (baton next
// shows them).
type Mark struct {
	At  time.Time // the instant (of a time not run: where it would have run)
	Ran bool      // false: the policy passes over this one
	// Skipped are the wall times (their fields read as UTC) a
	// spring-forward skipped that this tick, at the jump, stands for, the
	// first few of them; Skipped beyond those.
	Skipped []time.Time
	More    int
	// Copy is 1 or 2 for a tick of a wall time the clocks show twice (a
	// fall-back's repeated hour), 0 otherwise.
	Copy int
}

// marksShown bounds the skipped wall times a Mark lists.
const marksShown = 3

// Marks returns the next n ticks of s after after, s being spec read in
// loc under dst (and perhaps bounded by a window), with, before each, the
// times the spec names that dst passes over (Ran false; at most n of them
// in all). A window's start is the caller's to pass as after.
func Marks(s Schedule, spec string, loc *time.Location, dst DST, after time.Time, n int) ([]Mark, error) {
	if loc == nil {
		loc = time.UTC
	}
	var err error
	var all, wall Schedule // every copy and jump; the spec on wall times
	if strings.HasPrefix(strings.TrimSpace(spec), "@every") {
		all, wall = s, nil
	} else {
		if all, err = ParseDST(spec, loc, DSTBoth); err != nil {
			return nil, err
		}
		if wall, err = Parse(spec, time.UTC); err != nil {
			return nil, err
		}
	}
	// whether the policy runs a skipped time at the jump
	jumps := dst == DSTOnce || dst == DSTBoth || (dst == "" || dst == DSTVixie) && isFixedTime(strings.TrimSpace(spec))
	var out []Mark
	passed := 0
	prev := after
	for ran := 0; ran < n; ran++ {
		t := s.Next(prev)
		if t.IsZero() {
			break
		}
		for x := all.Next(prev); !x.IsZero() && x.Before(t) && passed < n; x = all.Next(x) {
			// what the policy passes over: a repeated time's second copy,
			// a skipped time's jump; a plain time left out is s's own
			// doing (its calendars or window), not the policy's
			if m := markOf(wall, loc, x, false); m.Copy == 2 || len(m.Skipped) > 0 {
				out = append(out, m)
				passed++
			}
		}
		m := markOf(wall, loc, t, true)
		if !jumps && len(m.Skipped) > 0 {
			// the tick the jump lands on is the spec's own; the skipped
			// times are not run
			out = append(out, Mark{At: m.At, Skipped: m.Skipped, More: m.More})
			m.Skipped, m.More = nil, 0
		}
		out = append(out, m)
		prev = t
	}
	return out, nil
}

// markOf describes instant at of a schedule whose wall times wall yields.
func markOf(wall Schedule, loc *time.Location, at time.Time, ran bool) Mark {
	m := Mark{At: at.In(loc), Ran: ran}
	if wall == nil {
		return m
	}
	w := wallOf(at.In(loc))
	if first := resolveWall(w, loc); wallOf(first).Equal(w) {
		// w exists: a second copy when an earlier instant shows it too
		start, _ := at.In(loc).ZoneBounds()
		_, off := at.In(loc).Zone()
		if !start.IsZero() {
			_, prevOff := start.Add(-time.Second).Zone()
			if early := at.Add(time.Duration(off-prevOff) * time.Second); prevOff > off && early.Before(start) && wallOf(early.In(loc)).Equal(w) {
				m.Copy = 2
			}
		}
		if m.Copy == 0 {
			if _, end := at.In(loc).ZoneBounds(); !end.IsZero() {
				_, nextOff := end.Zone()
				if late := at.Add(time.Duration(off-nextOff) * time.Second); nextOff < off && !late.Before(end) && wallOf(late.In(loc)).Equal(w) {
					m.Copy = 1
				}
			}
		}
	}
	// at the jump: the wall times the gap before at skipped
	start, _ := at.In(loc).ZoneBounds()
	if !start.Equal(at) {
		return m
	}
	before := wallOf(at.Add(-time.Second).In(loc)).Add(time.Second)
	for x := wall.Next(before.Add(-time.Second)); !x.IsZero() && x.Before(w); x = wall.Next(x) {
		if len(m.Skipped) < marksShown {
			m.Skipped = append(m.Skipped, x)
		} else {
			m.More++
		}
	}
	return m
}
