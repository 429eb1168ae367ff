package scheduler

import "github.com/batonhq/baton/internal/clock"

// Clock is the source of time the scheduler reads (see WithClock): Now and
// NewTimer, as package time has them.
type Clock = clock.Clock

// Timer is the part of *time.Timer the scheduler uses. As with time.Timer
// since Go 1.23, no stale value is received from C after Stop or Reset
// returns.
type Timer = clock.Timer

// RealClock returns the Clock backed by package time.
func RealClock() Clock { return clock.Real() }
