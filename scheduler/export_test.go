package scheduler

import "time"

// WithObserver hands every claim won, commit and lease released to f, for
// the fault schedules' history (tests only).
func WithObserver(f func(kind, job string, tick time.Time, replica string)) Option {
	return func(o *options) { o.observe = f }
}

// WithClaimsInFlight sets how many claimed chunks a replica has in flight
// (claimsInFlight), so a test knows which chunk waits (tests only).
func WithClaimsInFlight(n int) Option {
	return func(o *options) { o.claimsInFlight = n }
}

// FollowerClaimKeptAfterPut puts put, which replaces job name, and tells
// whether a follower's claim of name's tick at, readied under the old
// definition and not attempted yet, is still made.
func FollowerClaimKeptAfterPut(s *Scheduler, name string, at time.Time, put Job) (bool, error) {
	old, _ := s.job(name)
	if err := s.Put(put); err != nil {
		return false, err
	}
	_, ok := s.current(item{job: old, at: at, fireAt: at, kind: kindFollower})
	return ok, nil
}

// QueueLen is how many entries Run's queue held at its loop's last turn
// (tests only).
func QueueLen(s *Scheduler) int64 { return s.queued.Load() }
