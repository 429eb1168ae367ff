package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease is what starting a child under a lease needs of it: its deadline,
// which extensions move, and whether it ended.
type Lease interface {
	Deadline() time.Time
	Done() <-chan struct{}
}

// MaxLeaseStarts bounds the starts of StartUnder.
const MaxLeaseStarts = 3

// ErrLeaseTooShort marks a StartUnder whose every start found the lease's
// time left too short to start the child under, while the lease was
// extended meanwhile: a ttl shorter than a start takes on this host. It
// wraps ErrDeadline.
var ErrLeaseTooShort = fmt.Errorf("%w: the lease's ttl is shorter than a start takes here", ErrDeadline)

// StartUnder starts spec's supervisor with the deadline of lease and
// returns it with that deadline. A lease extended while the supervisor
// started (slow to start on a busy host) has not run out: the deadline the
// supervisor refused is not the lease's any more, so it starts again under
// the lease's, until it starts, the lease ends or is not extended, or
// MaxLeaseStarts starts were refused (an error wrapping ErrLeaseTooShort:
// started again for as long as the lease is held, it would run nothing).
func StartUnder(ctx context.Context, lease Lease, spec Spec) (*Process, time.Time, error) {
	spec.Deadline = lease.Deadline()
	p, err := Start(ctx, spec)
	for starts := 1; errors.Is(err, ErrDeadline) && ctx.Err() == nil && extendedPast(lease, spec.Deadline); starts++ {
		if starts == MaxLeaseStarts {
			return nil, spec.Deadline, fmt.Errorf("%w (%d starts of %q, the last: %w)", ErrLeaseTooShort, starts, spec.Args[0], err)
		}
		spec.Deadline = lease.Deadline()
		p, err = Start(ctx, spec)
	}
	return p, spec.Deadline, err
}

// extendedPast reports whether lease still runs with a deadline after was.
func extendedPast(lease Lease, was time.Time) bool {
	select {
	case <-lease.Done():
		return false
	default:
		return lease.Deadline().After(was)
	}
}
