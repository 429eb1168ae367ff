package scheduler

import "time"

// WithObserver hands every claim won, commit and lease released to f, for
// the fault schedules' history (tests only).
func WithObserver(f func(kind, job string, tick time.Time, replica string)) Option {
	return func(o *options) { o.observe = f }
}
