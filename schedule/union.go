package schedule

import "time"

// Union is the schedule whose ticks are those of every one of its
// schedules: a job run after others (config after:) ticks at each tick of
// any of them, once for an instant several share. A nil member is left out.
type Union []Schedule

// Next returns the earliest of the members' next ticks after after, or
// the zero time when none has one.
func (u Union) Next(after time.Time) time.Time {
	var next time.Time
	for _, s := range u {
		if s == nil {
			continue
		}
		if t := s.Next(after); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// Has reports whether s has a tick at t.
func Has(s Schedule, t time.Time) bool {
	return s != nil && s.Next(t.Add(-time.Nanosecond)).Equal(t)
}
