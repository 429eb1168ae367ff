package schedule

// Catchup is a job's catch-up policy: which of the ticks it missed while no
// replica was running, or while the lock masters or the queue failed, are
// dispatched afterwards (only ticks still inside the job's starting deadline
// count; the others are missed whatever the policy).
type Catchup string

// The catch-up policies.
const (
	// CatchupSkip dispatches none of the missed ticks.
	CatchupSkip Catchup = "skip"
	// CatchupLatest dispatches the most recent missed tick. The default.
	CatchupLatest Catchup = "latest"
	// CatchupAll dispatches every missed tick, oldest first, at most the
	// job's catchup_max of them (the most recent ones).
	CatchupAll Catchup = "all"
)

// Valid reports whether c is one of the policies.
func (c Catchup) Valid() bool {
	return c == CatchupSkip || c == CatchupLatest || c == CatchupAll
}
