package scheduler

import (
	"time"

	"github.com/batonhq/baton/schedule"
)

// The scheduler's schedules are package schedule's; these names are kept
// for the programs written against the scheduler.

// Schedule yields the ticks of a job (schedule.Schedule).
type Schedule = schedule.Schedule

// ScheduleFunc adapts a function to the Schedule interface (schedule.Func).
type ScheduleFunc = schedule.Func

// Catchup is a job's catch-up policy (schedule.Catchup).
type Catchup = schedule.Catchup

// The catch-up policies.
const (
	// CatchupSkip dispatches none of the missed ticks.
	CatchupSkip = schedule.CatchupSkip
	// CatchupLatest dispatches the most recent missed tick. The default.
	CatchupLatest = schedule.CatchupLatest
	// CatchupAll dispatches every missed tick, or the most recent
	// CatchupMax of them when there are more.
	CatchupAll = schedule.CatchupAll
)

// ParseSchedule parses a cron spec evaluated in loc (schedule.Parse).
func ParseSchedule(spec string, loc *time.Location) (Schedule, error) {
	return schedule.Parse(spec, loc)
}

// Ticks returns the ticks of s in (after, until], at most max
// (schedule.Ticks).
func Ticks(s Schedule, after, until time.Time, max int) []time.Time {
	return schedule.Ticks(s, after, until, max)
}

// ShortestInterval is the shortest gap between ticks of s from from
// (schedule.ShortestInterval).
func ShortestInterval(s Schedule, from time.Time) time.Duration {
	return schedule.ShortestInterval(s, from)
}

// Window is s within [start, end) (schedule.Window).
func Window(s Schedule, start, end time.Time) Schedule { return schedule.Window(s, start, end) }

// Once is the schedule of the single tick at (schedule.Once).
func Once(at time.Time) Schedule { return schedule.Once(at) }

// Jitter is the job's stable delay below max (schedule.Jitter).
func Jitter(job string, max time.Duration) time.Duration { return schedule.Jitter(job, max) }
