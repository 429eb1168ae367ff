package supervisor

import (
	"math"
	"syscall"
)

// never is an instant that never comes: no deadline, no stop, nothing due.
const never = math.MaxInt64

// watchdog decides when the supervisor signals the child: SIGTERM at
// "deadline - grace - margin" and SIGKILL at "deadline - margin", for the
// lease's deadline as extend last moved it; or sooner when a stop asks for
// SIGTERM now and SIGKILL after the stop's grace. Each signal is due at
// most once, and one sent is never taken back. It reads no clock: every
// method takes now, in CLOCK_BOOTTIME nanoseconds (monoNow in the
// supervisor), as the deadlines are.
type watchdog struct {
	grace, margin      int64 // ns, from the request
	dTerm, dKill       int64 // from the deadline; never without one
	sTerm, sKill       int64 // from a stop; never before one
	termSent, killSent bool
	// hit: a deadline, not a stop, caused a signal (the supervisor then
	// exits with ExitDeadline)
	hit bool
}

// newWatchdog returns the watchdog of a run whose lease ends at deadline
// (0: none), armed at now.
func newWatchdog(deadline, grace, margin, now int64) *watchdog {
	w := &watchdog{grace: grace, margin: margin, sTerm: never, sKill: never}
	w.extend(deadline, now)
	return w
}

// extend moves the deadline to deadline (0: none) at now. SIGKILL is due
// at deadline - margin and SIGTERM the grace before it; when less than
// twice the grace is left, SIGTERM comes at half the time left instead,
// so that a regular extension (at a third of the lease's ttl) still
// arrives before it.
func (w *watchdog) extend(deadline, now int64) {
	if deadline == 0 {
		w.dTerm, w.dKill = never, never
		return
	}
	w.dKill = deadline - w.margin
	g := w.grace
	if half := (w.dKill - now) / 2; half < g {
		g = max(half, 0)
	}
	w.dTerm = w.dKill - g
}

// stop makes SIGTERM due at now and SIGKILL at now + grace, unless either
// is due sooner already: a stop never postpones a signal.
func (w *watchdog) stop(now, grace int64) {
	w.sTerm = min(w.sTerm, now)
	w.sKill = min(w.sKill, now+grace)
}

// signalDue is a signal the watchdog has due: send sig to the child
// (child.stop), and if deadline is set, report that the deadline fired.
type signalDue struct {
	sig syscall.Signal
	// deadline: the first signal a deadline (rather than a stop) caused
	deadline bool
}

// due returns the signals due at now that are not sent yet, SIGTERM
// before SIGKILL, and takes them as sent.
func (w *watchdog) due(now int64) []signalDue {
	var out []signalDue
	if !w.termSent && now >= min(w.dTerm, w.sTerm) {
		w.termSent = true
		out = append(out, signalDue{syscall.SIGTERM, w.firstHit(now >= w.dTerm)})
	}
	if !w.killSent && now >= min(w.dKill, w.sKill) {
		w.killSent = true
		out = append(out, signalDue{syscall.SIGKILL, w.firstHit(now >= w.dKill)})
	}
	return out
}

// firstHit notes a signal the deadline caused (byDeadline) and tells
// whether it is the first such.
func (w *watchdog) firstHit(byDeadline bool) bool {
	if !byDeadline || w.hit {
		return false
	}
	w.hit = true
	return true
}

// next returns when the next signal is due, never when none is left to
// send.
func (w *watchdog) next() int64 {
	next := int64(never)
	if !w.termSent {
		next = min(w.dTerm, w.sTerm)
	}
	if !w.killSent {
		next = min(next, w.dKill, w.sKill)
	}
	return next
}
