package schedule

import "time"

// Window returns s restricted to the ticks at or after start and at or
// before end; a zero start or end leaves that side open. A job's start and
// end times are its schedule's window.
func Window(s Schedule, start, end time.Time) Schedule {
	switch {
	case start.IsZero() && end.IsZero():
		return s
	case end.IsZero() && start.Year() > 1700 && start.Year() < 2200:
		// a runtime schedule's (from its put on), one per schedule: 32
		// bytes, not the 64 of a window with both ends
		return &fromSchedule{inner: s, start: start.UnixNano(), loc: start.Location()}
	}
	return &windowSchedule{inner: s, start: start, end: end}
}

// fromSchedule is a window with a start only, its instant in unix ns.
type fromSchedule struct {
	inner Schedule
	start int64
	loc   *time.Location
}

func (w *fromSchedule) Next(after time.Time) time.Time {
	if start := time.Unix(0, w.start).In(w.loc); after.Before(start) {
		after = start.Add(-time.Nanosecond)
	}
	return w.inner.Next(after)
}

type windowSchedule struct {
	inner      Schedule
	start, end time.Time
}

func (w *windowSchedule) Next(after time.Time) time.Time {
	if !w.start.IsZero() && after.Before(w.start) {
		after = w.start.Add(-time.Nanosecond)
	}
	n := w.inner.Next(after)
	if n.IsZero() || !w.end.IsZero() && n.After(w.end) {
		return time.Time{}
	}
	return n
}

// Once is the schedule of a one-shot job: the single tick at (truncated to
// whole seconds), then none.
func Once(at time.Time) Schedule {
	at = at.Truncate(time.Second)
	return Func(func(after time.Time) time.Time {
		if at.After(after) {
			return at
		}
		return time.Time{}
	})
}
